"""Embeddings for the semantic leg of search: an offline default and the ``RAG_EMBEDDINGS`` setting.

:func:`default_embeddings` is a LangChain ``Embeddings`` over the 256-dimension static model
bundled in the ``wordllama`` wheel (``pip install "readonly-rag[semantic]"``), or ``None`` when
``wordllama`` is not installed. It never downloads anything: wordllama's own loader looks for the
tokenizer in a folder the wheel does not have (``tokenizer/`` instead of ``tokenizers/``), then in
``~/.cache/wordllama``, then fetches it from Hugging Face; this module reads both files (the
``safetensors`` weights and the tokenizer JSON) straight from the installed package with the
``safetensors`` and ``tokenizers`` libraries wordllama itself uses, and hands them to wordllama's
``WordLlamaInference``.

:func:`embeddings_from_setting` turns a ``RAG_EMBEDDINGS`` value into embeddings:

* ``none`` (the default): no embeddings; search ranks by keyword and says so;
* ``default``: :func:`default_embeddings`; a ``ConfigurationError`` when wordllama is missing;
* ``openai:<model>``: ``OpenAIEmbeddings(model=<model>)`` from ``langchain-openai``, built on
  first use (creating an agent sends nothing and needs no key yet).

Example::

    facade = create_read_only_facade("memory", embeddings=default_embeddings())
    facade.search("inquiries", "customers who want to stop paying", k=5)
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from persistence.errors import ConfigurationError

__all__ = [
    "DEFAULT_EMBEDDINGS_MODEL_ID",
    "SEMANTIC_INSTALL_HINT",
    "WordLlamaEmbeddings",
    "default_embeddings",
    "embeddings_from_setting",
]

#: What vectors made by :func:`default_embeddings` are recorded as.
DEFAULT_EMBEDDINGS_MODEL_ID = "wordllama:l2_supercat_256"
SEMANTIC_INSTALL_HINT = 'pip install "readonly-rag[semantic]"'
_WEIGHTS = Path("weights") / "l2_supercat_256.safetensors"
_TOKENIZER = Path("tokenizers") / "l2_supercat_tokenizer_config.json"
_TENSOR = "embedding.weight"


def _package_dir() -> Path | None:
    """wordllama's installed folder, found without importing it (``None`` when absent)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _import_inference() -> Any:
    # Importing wordllama calls logging.basicConfig(level=INFO): undo it, a library must not
    # configure its caller's logging.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from wordllama.inference import WordLlamaInference
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return WordLlamaInference


_models: dict[tuple[Path, Path], Any] = {}
_models_lock = threading.Lock()


def _load_model(weights_path: Path, tokenizer_path: Path) -> Any:
    """wordllama's inference object over these two files, loaded once per process (the model is
    read-only once built, so every ``WordLlamaEmbeddings`` shares it)."""
    with _models_lock:
        model = _models.get((weights_path, tokenizer_path))
        if model is None:
            from safetensors import safe_open
            from tokenizers import Tokenizer

            inference = _import_inference()
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            with safe_open(str(weights_path), framework="np", device="cpu") as weights:
                matrix = weights.get_tensor(_TENSOR)
            model = _models[(weights_path, tokenizer_path)] = inference(matrix, tokenizer)
        return model


class WordLlamaEmbeddings(Embeddings):
    """wordllama's bundled 256-dimension model, loaded from the installed wheel's own files.

    Vectors are mean-pooled token vectors scaled to unit length (a text with no known token
    gives the zero vector, which search refuses as having no direction). Deterministic; no
    network. The model loads on first use, once per process. Thread-safe: the model is read-only
    once loaded, and loading takes a lock.
    """

    model_id: str = DEFAULT_EMBEDDINGS_MODEL_ID

    def __init__(self, package_dir: Path | None = None) -> None:
        directory = package_dir if package_dir is not None else _package_dir()
        if directory is None:
            raise ConfigurationError(
                f"the default embeddings need wordllama; run `{SEMANTIC_INSTALL_HINT}`",
                variable="RAG_EMBEDDINGS",
            )
        self._weights = directory / _WEIGHTS
        self._tokenizer = directory / _TOKENIZER
        for path in (self._weights, self._tokenizer):
            if not path.is_file():
                raise ConfigurationError(
                    f"the installed wordllama has no {path.name}; reinstall it "
                    f"(`{SEMANTIC_INSTALL_HINT}`)",
                    variable="RAG_EMBEDDINGS",
                )
        self._lock = threading.Lock()
        self._model: Any = None

    @property
    def dimension(self) -> int:
        """The vectors' dimension (256)."""
        return int(self._loaded().embedding.shape[1])

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = _load_model(self._weights, self._tokenizer)
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors of ``texts`` (the zero vector for a text with no known token)."""
        if not texts:
            return []
        import numpy as np

        # The tokenizer takes valid UTF-8 only: a lone surrogate (from undecodable input)
        # becomes "?" rather than an error.
        clean = [text.encode("utf-8", "replace").decode("utf-8") for text in texts]
        pooled = self._loaded().embed(clean, norm=False, return_np=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = np.divide(pooled, norms, out=np.zeros_like(pooled), where=norms > 0)
        vectors: list[list[float]] = unit.tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of ``text``."""
        return self.embed_documents([text])[0]

    def __repr__(self) -> str:
        return f"WordLlamaEmbeddings({self.model_id!r})"


def default_embeddings() -> WordLlamaEmbeddings | None:
    """The offline default embeddings, or ``None`` when ``wordllama`` is not installed.

    The model loads on first use (about 16 MB read from the wheel), never from the network.
    """
    if _package_dir() is None:
        return None
    return WordLlamaEmbeddings()


class _LazyOpenAIEmbeddings(Embeddings):
    """``OpenAIEmbeddings(model=...)`` built on the first call, so configuring it sends nothing
    and needs no key yet. Thread-safe."""

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        self.model = model
        self.model_id = f"openai:{model}"
        self._options = options
        self._lock = threading.Lock()
        self._client: Embeddings | None = None

    def _embeddings(self) -> Embeddings:
        with self._lock:
            if self._client is None:
                from langchain_openai import OpenAIEmbeddings

                self._client = OpenAIEmbeddings(model=self.model, **self._options)
            return self._client

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embeddings().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._embeddings().embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self._embeddings().aembed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await self._embeddings().aembed_query(text)

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings(model={self.model!r})"


def embeddings_from_setting(value: str | None, settings: Any = None) -> Embeddings | None:
    """The embeddings a ``RAG_EMBEDDINGS`` value names: ``none`` (or empty) → ``None``,
    ``default`` → :func:`default_embeddings`, ``openai:<model>`` → OpenAI embeddings built on
    first use (key and base URL from ``settings``, a ``RAGSettings``, when given; otherwise
    ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` as ``langchain-openai`` reads them). Anything else is
    a ``ConfigurationError`` naming ``RAG_EMBEDDINGS``."""
    text = (value or "").strip()
    choice = text.lower()
    if choice in ("", "none"):
        return None
    if choice == "default":
        embeddings = default_embeddings()
        if embeddings is None:
            raise ConfigurationError(
                f"RAG_EMBEDDINGS=default needs wordllama; run `{SEMANTIC_INSTALL_HINT}` "
                "or set RAG_EMBEDDINGS=none",
                variable="RAG_EMBEDDINGS",
            )
        return embeddings
    if choice.startswith("openai:"):
        model = text.partition(":")[2].strip()
        if not model:
            raise ConfigurationError(
                "RAG_EMBEDDINGS=openai:<model> needs a model name, e.g. "
                "openai:text-embedding-3-small",
                variable="RAG_EMBEDDINGS",
            )
        if importlib.util.find_spec("langchain_openai") is None:
            raise ConfigurationError(
                f"RAG_EMBEDDINGS={text} needs langchain-openai; run "
                '`pip install "readonly-rag[openai]"`',
                variable="RAG_EMBEDDINGS",
            )
        return _LazyOpenAIEmbeddings(model, _openai_options(settings))
    raise ConfigurationError(
        f"RAG_EMBEDDINGS={text!r} is not one of none, default, openai:<model>",
        variable="RAG_EMBEDDINGS",
    )


def _openai_options(settings: Any) -> dict[str, Any]:
    options: dict[str, Any] = {}
    key = getattr(settings, "openai_api_key", None)
    if key is not None:
        options["api_key"] = getattr(key, "get_secret_value", lambda: key)()
    base_url = getattr(settings, "openai_base_url", None)
    if base_url:
        options["base_url"] = base_url
    return options
