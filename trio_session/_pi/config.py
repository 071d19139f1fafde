"""pi's agent directory, read as pi 0.73.1 reads it: settings, custom models, keys.

``trio-session chat|rpc --agent-dir DIR`` (or ``$PI_CODING_AGENT_DIR``) reads:

```text
DIR/settings.json          global settings (pi's keys; ours too)
<cwd>/.pi/settings.json    project settings, above the global ones
DIR/models.json            custom providers and models
DIR/auth.json              API keys per provider
```

``load_agent_dir`` reads the three files once and returns an ``AgentDirConfig``;
nothing in it is ever printed whole: keys stay out of ``repr``, warnings and errors.

models.json, as pi's model-registry.js reads it: ``{"providers": {NAME: {baseUrl,
api, apiKey, headers, models: [{id, name, api, baseUrl, reasoning, input,
contextWindow, maxTokens, cost}], modelOverrides}}}``, with ``//`` comments and
trailing commas allowed. A file that breaks pi's rules is not used at all (pi keeps
only its built-in models then), with a warning naming the file and the field. The
schema, pi's built-in providers and the ``compat`` merge are ``models.py``'.

Key lookup for a provider, in pi's order (auth-storage.js ``getApiKey``, then the
models.json fallback): auth.json's ``{"type": "api_key", "key": …}``; the provider's
environment variable (``OPENAI_API_KEY``, …); models.json's ``apiKey``. Both
``key`` and ``apiKey`` are resolved as pi resolves config values: ``"!command"``
runs the command in a shell and takes its trimmed output (once per process); any
other text is the name of an environment variable if one is set, else the key itself.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .._core.classes import frozen
from .._core.errors import SettingsError
from .._files import RefusedFileError, read_regular
from .._settings.store import SettingsLayer, resolve
from ..providers._base import Model
from ..providers._models import builtin_model
from .models import BUILT_IN_PROVIDERS as BUILT_IN_PROVIDERS
from .models import BuiltInProvider as BuiltInProvider
from .models import InvalidModels, ProviderConfig, merge_compat, overridden, parse_models

#: The environment variable that names pi's agent directory.
AGENT_DIR_VARIABLE = "PI_CODING_AGENT_DIR"
#: The project directory pi reads settings from, relative to the working directory.
PROJECT_DIR_NAME = ".pi"
#: The APIs trio_session speaks, and the provider classes that speak them.
SUPPORTED_APIS = ("openai-completions", "anthropic-messages", "google-generative-ai")
#: The largest models.json or auth.json read, in bytes.
MAX_CONFIG_FILE_BYTES = 1 << 20
#: Seconds a ``"!command"`` key may take (pi's limit).
COMMAND_TIMEOUT = 10.0


def agent_dir_from(
    flag: str | os.PathLike[str] | None, environ: Mapping[str, str] = os.environ
) -> Path | None:
    """The agent directory of ``--agent-dir``, else ``$PI_CODING_AGENT_DIR``, else ``None``.

    As pi does, a leading ``~`` is the home directory. Without either, trio_session
    keeps its own configuration directories: pi's is read only when asked for.
    """
    raw = os.fspath(flag) if flag is not None else environ.get(AGENT_DIR_VARIABLE, "")
    return Path(raw).expanduser() if raw else None


@frozen
class AgentDirConfig:
    """What pi's agent directory says; see the module docstring.

    Attributes:
        path: the agent directory.
        cwd: the project directory (``<cwd>/.pi/settings.json``).
        settings_paths: the global then the project settings file (either may be missing).
        models: the custom models of models.json, in file order.
        warnings: what was not used, and why; never a key.
    """

    path: Path
    cwd: Path
    settings_paths: tuple[Path, ...]
    models: tuple[Model, ...] = ()
    warnings: tuple[str, ...] = ()
    _providers: Mapping[str, ProviderConfig] = attrs.field(
        factory=dict, alias="providers", repr=False
    )
    _auth: Mapping[str, Any] = attrs.field(factory=dict, alias="auth", repr=False)
    _environ: Mapping[str, str] = attrs.field(
        factory=lambda: os.environ, alias="environ", repr=False
    )

    @property
    def models_path(self) -> Path:
        """``DIR/models.json``."""
        return self.path / "models.json"

    @property
    def auth_path(self) -> Path:
        """``DIR/auth.json``."""
        return self.path / "auth.json"

    def find_model(self, provider: str, model_id: str) -> Model | None:
        """The model ``provider``/``model_id``: a custom one of models.json, else one at a
        built-in provider (its endpoint, or the models.json ``baseUrl`` override; the
        context window and prices of trio_session's built-in table, if it knows the
        model; then any ``modelOverrides``), else ``None``."""
        for model in self.models:
            if model.provider == provider and model.id == model_id:
                return model
        built_in = BUILT_IN_PROVIDERS.get(provider)
        if built_in is None:
            return None
        config = self._providers.get(provider, ProviderConfig())
        base_url = config.base_url or built_in.base_url or None
        known = builtin_model(provider, model_id, base_url=base_url)
        model = (
            attrs.evolve(known, api=built_in.api)
            if known is not None
            else Model(id=model_id, provider=provider, api=built_in.api, base_url=base_url)
        )
        if config.compat is not None:
            model = attrs.evolve(model, compat=merge_compat(model.compat, config.compat))
        override = config.model_overrides.get(model_id)
        return overridden(model, override) if override else model

    def provider_models(self, provider: str) -> tuple[Model, ...]:
        """The custom models of ``provider``, in file order."""
        return tuple(m for m in self.models if m.provider == provider)

    def default_model(self) -> Model | None:
        """The model of the settings' ``defaultProvider``/``defaultModel`` (pi's files).

        Raises:
            SettingsError: a settings file cannot be read, or holds a bad value.
        """
        settings = resolve(SettingsLayer.from_file(p, pi=True) for p in self.settings_paths)
        if settings.default_provider is None or settings.default_model is None:
            return None
        return self.find_model(settings.default_provider, settings.default_model)

    def api_key(self, provider: str) -> str | None:
        """The key for ``provider``: auth.json, its environment variable, models.json.

        Raises:
            SettingsError: a ``"!command"`` key whose command fails or prints nothing.
                The message names the file and the provider, never the key.
        """
        entry = self._auth.get(provider)
        if isinstance(entry, Mapping) and entry.get("type") == "api_key":
            key = entry.get("key")
            if isinstance(key, str) and key:
                where = f"the key of {provider} in {self.auth_path}"
                resolved = self._resolve(key, where, quiet=True)
                if resolved:
                    return resolved
        built_in = BUILT_IN_PROVIDERS.get(provider)
        for variable in built_in.key_variables if built_in else ():
            if value := self._environ.get(variable):
                return value
        config = self._providers.get(provider)
        if config is not None and config.api_key:
            where = f"the apiKey of provider {provider} in {self.models_path}"
            return self._resolve(config.api_key, where)
        return None

    def headers(self, provider: str, model_id: str) -> dict[str, str]:
        """The extra request headers of models.json for this provider and model, resolved."""
        config = self._providers.get(provider)
        if config is None:
            return {}
        where = f"a header of provider {provider} in {self.models_path}"
        return {name: self._resolve(value, where) or "" for name, value in config.headers.items()}

    def _resolve(self, value: str, where: str, *, quiet: bool = False) -> str | None:
        """pi's ``resolveConfigValue``: ``!command``, else an env variable's value, else itself.

        ``quiet``: a failing command gives ``None`` (auth.json, as pi does) instead of an error.
        """
        if value.startswith("!"):
            output = _run_key_command(value[1:])
            if output is None and not quiet:
                msg = f"cannot resolve {where}: its command failed or printed nothing"
                raise SettingsError(msg, source=where)
            return output
        return self._environ.get(value) or value


_COMMAND_CACHE: dict[str, str | None] = {}


def _run_key_command(command: str) -> str | None:
    """The trimmed standard output of ``command`` run by the shell; ``None`` if it fails.

    Cached for the life of the process, as pi caches it. Its stderr is discarded: it
    could hold the key.
    """
    if command in _COMMAND_CACHE:
        return _COMMAND_CACHE[command]
    try:
        done = subprocess.run(  # the user's own configured command, as pi runs it
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        output = None
    else:
        text = done.stdout.decode("utf-8", errors="replace").strip()
        output = text if done.returncode == 0 and text else None
    _COMMAND_CACHE[command] = output
    return output


# -- loading ---------------------------------------------------------------------------------


def load_agent_dir(
    path: str | os.PathLike[str],
    *,
    cwd: str | os.PathLike[str],
    environ: Mapping[str, str] = os.environ,
) -> AgentDirConfig:
    """Read pi's agent directory ``path`` for the project in ``cwd``.

    Settings files are only located here (``SettingsStore`` reads them, so their
    errors are reported where the other settings files' are). A models.json or
    auth.json that cannot be used is a warning, never an error: pi starts without
    it too. Missing files are fine.
    """
    directory = Path(path)
    project = Path(cwd).absolute()
    warnings: list[str] = []
    settings_paths = (
        directory / "settings.json",
        project / PROJECT_DIR_NAME / "settings.json",
    )
    models: tuple[Model, ...] = ()
    providers: dict[str, ProviderConfig] = {}
    models_path = directory / "models.json"
    data = _read_json(models_path, warnings, comments=True)
    if data is not None:
        try:
            providers, models = parse_models(data)
        except InvalidModels as exc:
            warnings.append(f"{models_path}: {exc}; its custom models and providers are not used")
    auth = _load_auth(directory / "auth.json", warnings)
    return AgentDirConfig(
        path=directory,
        cwd=project,
        settings_paths=settings_paths,
        models=models,
        warnings=tuple(warnings),
        providers=providers,
        auth=auth,
        environ=environ,
    )


def available_models(config: AgentDirConfig | None, current: Model) -> tuple[Model, ...]:
    """Every model a session started by the CLI may switch to: ``current`` first, then
    the custom models of models.json whose API trio_session speaks (pi's
    ``getAvailable`` lists built-in models too; we list only what we can reach)."""
    models = [current]
    for model in config.models if config is not None else ():
        if model.api in SUPPORTED_APIS and (model.provider, model.id) != (
            current.provider,
            current.id,
        ):
            models.append(model)
    return tuple(models)


def _strip_json_comments(text: str) -> str:
    """pi's ``stripJsonComments``: ``//`` line comments and trailing commas, not in strings."""
    text = re.sub(
        r'"(?:\\.|[^"\\])*"|//[^\n]*', lambda m: m[0] if m[0].startswith('"') else "", text
    )
    return re.sub(
        r'"(?:\\.|[^"\\])*"|,(\s*[}\]])', lambda m: m[1] if m[1] is not None else m[0], text
    )


def _read_json(path: Path, warnings: list[str], *, comments: bool = False) -> Any:
    """The JSON of ``path``, or ``None`` (missing: silently; unusable: with a warning)."""
    try:
        text = read_regular(path, MAX_CONFIG_FILE_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None
    except RefusedFileError as exc:  # a pipe or /dev/zero is refused at once, unread
        if exc.kind == "size":
            warnings.append(f"{path} is larger than {MAX_CONFIG_FILE_BYTES} bytes; not used")
        else:
            warnings.append(f"{path} is not a regular file; not used")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        warnings.append(f"cannot read {path}: {detail}; not used")
        return None
    try:
        return json.loads(_strip_json_comments(text) if comments else text)
    except json.JSONDecodeError as exc:  # the message quotes no text of the file
        warnings.append(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; not used"
        )
    except RecursionError:
        warnings.append(f"{path} is nested too deeply to read; not used")
    return None


def _load_auth(path: Path, warnings: list[str]) -> Mapping[str, Any]:
    data = _read_json(path, warnings)
    if data is None:
        return {}
    if not isinstance(data, dict):
        warnings.append(f"{path} must hold a JSON object, not {type(data).__name__}; not used")
        return {}
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0
    if os.name == "posix" and mode & 0o077:
        warnings.append(
            f"other users can read {path} (mode {mode:04o}); pi keeps it 0600: chmod 600 {path}"
        )
    for provider, entry in data.items():
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "oauth":
            warnings.append(
                f"{path}: {provider} has an OAuth login, which trio-session cannot use; "
                "give it an API key"
            )
        elif kind != "api_key" or not isinstance(entry.get("key"), str):
            warnings.append(f"{path}: the entry of {provider} is not an API key; not used")
    return data
