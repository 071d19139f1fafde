"""Values and pure rules: messages, events, errors, the codec, bounded JSON."""
