"""Job failures and retry policies.

A :class:`FailureModel` is a list of failure classes, each with the share of
jobs it hits, a runtime-to-failure (RTF) distribution and whether retrying can
help. A job hit by a class fails ``RTF`` seconds (wall clock) after each
attempt starts running its code:

* a **non-retryable** class (deterministic user error: bad input, syntax
  error) fails every attempt, with a fresh RTF draw per attempt;
* a **retryable** class (transient: MPI, checkpoint write, preemption) fails
  the first attempt and each retry again with ``repeat_probability``; once an
  attempt escapes it, the job is clear of it.

If the RTF exceeds the job's running time, the job finishes first. All draws
are made up front from the seed, so results do not depend on event order.

The default classes (:func:`default_failure_model`) use the paper's reason
names and categories, but their probabilities and RTF parameters are
**illustrative assumptions, not from the paper**: they only encode its
qualitative findings (user errors dominate and show early; infrastructure
failures are rarer and come after long runs). Replace them with fitted values
through :meth:`FailureModel.from_dict` / :meth:`FailureModel.from_yaml`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import ndtri

CATEGORIES = ("infrastructure", "ai_engine", "user")
_DIST_PARAMS = {"lognormal": ("median_s", "sigma"), "exponential": ("mean_s",), "weibull": ("scale_s", "shape"),
                "empirical": ("samples_s",)}


@dataclass(frozen=True)
class FailureClass:
    """One failure reason: who is hit, when it strikes, whether a retry can succeed."""

    name: str
    category: str
    probability: float
    rtf: dict
    retryable: bool
    repeat_probability: float = 0.0

    def __post_init__(self):
        where = f"failure class {self.name!r}"
        if self.category not in CATEGORIES:
            raise ValueError(f"{where}: category must be one of {CATEGORIES}, got {self.category!r}")
        if not 0 <= self.probability <= 1:
            raise ValueError(f"{where}: probability must be in [0, 1], got {self.probability!r}")
        if not 0 <= self.repeat_probability <= 1:
            raise ValueError(f"{where}: repeat_probability must be in [0, 1], got {self.repeat_probability!r}")
        dist = self.rtf.get("dist")
        if dist not in _DIST_PARAMS:
            raise ValueError(f"{where}: rtf.dist must be one of {sorted(_DIST_PARAMS)}, got {dist!r}")
        for param in _DIST_PARAMS[dist]:
            if param not in self.rtf:
                raise ValueError(f"{where}: rtf.{param} is required for dist {dist!r}")
        if dist == "empirical":
            samples = np.asarray(self.rtf["samples_s"], dtype=float)
            if samples.size == 0 or (samples < 0).any() or not np.isfinite(samples).all():
                raise ValueError(f"{where}: rtf.samples_s must be non-empty, finite and >= 0")
        else:
            for param in _DIST_PARAMS[dist]:
                if not float(self.rtf[param]) > 0:
                    raise ValueError(f"{where}: rtf.{param} must be > 0, got {self.rtf[param]!r}")

    def rtf_from_uniform(self, u: np.ndarray) -> np.ndarray:
        """Runtimes to failure (s) by inverse transform of uniforms in (0, 1)."""
        r, dist = self.rtf, self.rtf["dist"]
        if dist == "lognormal":
            return float(r["median_s"]) * np.exp(float(r["sigma"]) * ndtri(u))
        if dist == "exponential":
            return -float(r["mean_s"]) * np.log1p(-u)
        if dist == "weibull":
            return float(r["scale_s"]) * (-np.log1p(-u)) ** (1.0 / float(r["shape"]))
        return np.quantile(np.asarray(r["samples_s"], dtype=float), u)


@dataclass(frozen=True)
class FailureDraws:
    """Per-job failure class (-1 = none) and pre-drawn RTFs and repeat draws per failed attempt."""

    job_class: np.ndarray
    rtf_s: np.ndarray
    repeat_u: np.ndarray


@dataclass(frozen=True)
class FailureModel:
    classes: tuple[FailureClass, ...]

    def __post_init__(self):
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"failure model: class names are not unique: {names}")
        total = sum(c.probability for c in self.classes)
        if total > 1 + 1e-9:
            raise ValueError(f"failure model: class probabilities sum to {total:.3f} > 1")

    @classmethod
    def from_dict(cls, spec: dict) -> "FailureModel":
        """``{"classes": {name: {category, probability, rtf: {dist, ...}, retryable, repeat_probability}}}``."""
        if not isinstance(spec, dict) or not isinstance(spec.get("classes"), dict):
            raise ValueError("failure model: expected a mapping with a 'classes' mapping")
        classes = []
        for name, entry in spec["classes"].items():
            if not isinstance(entry, dict):
                raise ValueError(f"failure class {name!r}: expected a mapping")
            unknown = set(entry) - {"category", "probability", "rtf", "retryable", "repeat_probability"}
            if unknown:
                raise ValueError(f"failure class {name!r}: unknown field(s) {sorted(unknown)}")
            for required in ("category", "probability", "rtf", "retryable"):
                if required not in entry:
                    raise ValueError(f"failure class {name!r}: missing field {required!r}")
            classes.append(FailureClass(name=str(name), category=entry["category"],
                                        probability=float(entry["probability"]), rtf=dict(entry["rtf"]),
                                        retryable=bool(entry["retryable"]),
                                        repeat_probability=float(entry.get("repeat_probability", 0.0))))
        return cls(tuple(classes))

    @classmethod
    def from_yaml(cls, path: str | Path) -> "FailureModel":
        import yaml
        with open(path) as fh:
            return cls.from_dict(yaml.safe_load(fh))

    def index_of(self, name: str) -> int:
        for i, c in enumerate(self.classes):
            if c.name == name:
                return i
        raise ValueError(f"failure class {name!r} is not in the model ({[c.name for c in self.classes]})")

    def draws(self, num_jobs: int, max_failures: int, seed: int, given=None) -> FailureDraws:
        """Classes (from ``given`` names where not None, else drawn) and RTFs for ``max_failures`` attempts."""
        rng = np.random.default_rng([seed, 0xFA11])
        probs = np.array([c.probability for c in self.classes] + [0.0])
        probs[-1] = max(0.0, 1.0 - probs[:-1].sum())
        drawn = rng.choice(len(probs), size=num_jobs, p=probs / probs.sum())
        job_class = np.where(drawn == len(self.classes), -1, drawn).astype(np.int64)
        if given is not None:
            for j, name in enumerate(given):
                if name is not None and not (isinstance(name, float) and np.isnan(name)):
                    job_class[j] = self.index_of(str(name))
        u = np.clip(rng.random((num_jobs, max_failures)), 1e-12, 1 - 1e-12)
        repeat_u = rng.random((num_jobs, max_failures))
        rtf = np.full((num_jobs, max_failures), np.inf)
        for i, c in enumerate(self.classes):
            rows = job_class == i
            if rows.any():
                rtf[rows] = c.rtf_from_uniform(u[rows])
        return FailureDraws(job_class=job_class, rtf_s=rtf, repeat_u=repeat_u)


def default_failure_model() -> FailureModel:
    """Paper reason names; ILLUSTRATIVE probabilities and RTFs (assumptions, not from the paper)."""
    def lognormal(median_s, sigma):
        return {"dist": "lognormal", "median_s": median_s, "sigma": sigma}
    user = [("syntax error", 0.03, lognormal(60, 1.0)), ("import error", 0.02, lognormal(90, 1.0)),
            ("incorrect inputs", 0.03, lognormal(300, 1.5)), ("semantic error", 0.02, lognormal(1800, 1.5)),
            ("GPU out of memory", 0.02, lognormal(600, 1.5)), ("CPU out of memory", 0.01, lognormal(3600, 1.5))]
    classes = [FailureClass(n, "user", p, rtf, retryable=False) for n, p, rtf in user]
    classes += [
        FailureClass("CUDA failure", "ai_engine", 0.01, lognormal(1800, 2.0), retryable=True, repeat_probability=0.5),
        FailureClass("MPI runtime failure", "ai_engine", 0.01, lognormal(14400, 1.5), retryable=True,
                     repeat_probability=0.3),
        FailureClass("model checkpoint error", "infrastructure", 0.01, lognormal(7200, 1.5), retryable=True,
                     repeat_probability=0.3),
        FailureClass("job preempted", "infrastructure", 0.005, lognormal(28800, 1.5), retryable=True,
                     repeat_probability=0.1),
    ]
    return FailureModel(tuple(classes))


@dataclass(frozen=True)
class RetryPolicy:
    """What happens after a failed attempt.

    ``max_retries``: attempts after the first that may follow failures.
    ``retry_non_retryable``: False never retries deterministic (non-retryable) errors.
    ``prerun_s``: > 0 runs multi-GPU jobs first for this long on one GPU (its
    progress is discarded), so early failures cost one GPU instead of the gang.
    ``keep_progress``: a failed attempt's progress is kept (checkpointing) or lost.
    """

    max_retries: int = 3
    retry_non_retryable: bool = True
    prerun_s: float = 0.0
    keep_progress: bool = False

    def __post_init__(self):
        if int(self.max_retries) != self.max_retries or self.max_retries < 0:
            raise ValueError(f"retry policy: max_retries must be a non-negative integer, got {self.max_retries!r}")
        if not self.prerun_s >= 0:
            raise ValueError(f"retry policy: prerun_s must be >= 0, got {self.prerun_s!r}")


# Philly retries blindly; the paper's implication 3 adapts retries to the failure class
# and catches programming errors on one GPU first.
RETRY_PRESETS = {
    "philly": RetryPolicy(max_retries=3, retry_non_retryable=True),
    "adaptive": RetryPolicy(max_retries=3, retry_non_retryable=False),
    "prerun": RetryPolicy(max_retries=3, retry_non_retryable=False, prerun_s=300.0),
}
