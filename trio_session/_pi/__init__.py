"""pi's own files read as pi reads them: models, config, resources, prompts."""
