"""Privacy accounting for Gaussian linear mechanisms.

A Gaussian linear mechanism ``M(x) = B x + N(0, Σ)`` has privacy cost ``pcost`` = the largest
diagonal entry of ``Bᵀ Σ⁻¹ B`` (ResidualPlanner+ paper, Definition 2). From it:

* ρ-zCDP with ``ρ = pcost / 2``;
* μ-Gaussian DP with ``μ = sqrt(pcost)``;
* (ε, δ)-DP for every ε ≥ 0 with the exact analytic-Gaussian curve (Balle & Wang 2018)
  ``δ(ε) = Φ(√p/2 − ε/√p) − e^ε Φ(−√p/2 − ε/√p)``, ``p = pcost``.

The conversions between ``pcost`` and (ε, δ) are done by bracketing root finding on this exact
curve (δ is decreasing in ε and increasing in pcost), in log space for numerical stability.

That curve holds for continuous Gaussian noise only. The secure default noise is discrete, whose
(ε, δ) is stated by the zCDP conversion (:func:`epsilon_from_zcdp`); an asked (ε, δ) is therefore
converted with that same bound unless the caller says continuous noise will be drawn
(:func:`approx_pcost`, :data:`NOISE_ACCOUNTING`; the sources are in :mod:`dpmatrix._accounting`).
Neighbouring datasets differ by adding or removing one record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import BudgetError

__all__ = [
    "ANALYTIC",
    "DISCRETE_ZCDP",
    "NOISE_ACCOUNTING",
    "PURE",
    "Budget",
    "PrivacyReport",
    "accounting_of",
    "approx_pcost",
    "stated_epsilon",
    "delta_from_epsilon",
    "epsilon_from_zcdp",
    "epsilon_from_delta",
    "pcost_from_epsilon_delta",
    "resolve_pcost",
]


def _check_positive(name: str, value: float) -> float:
    # a string ("1") or a bool is a caller's mistake, never silently a number
    if isinstance(value, (str, bytes, bool)):
        raise BudgetError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise BudgetError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise BudgetError(f"{name} must be finite, got {value!r}")
    if v <= 0:
        raise BudgetError(f"{name} must be positive, got {value!r}")
    return v


def delta_from_epsilon(epsilon: float, pcost: float) -> float:
    """Exact δ at a given ε for a Gaussian mechanism of privacy cost ``pcost`` (Definition 2)."""
    eps = float(epsilon)
    if eps < 0 or not math.isfinite(eps):
        raise BudgetError(f"epsilon must be a finite non-negative number, got {epsilon!r}")
    p = _check_positive("pcost", pcost)
    from scipy.special import log_ndtr  # here, not at import: statement lines stay import-light

    s = math.sqrt(p)
    a = s / 2 - eps / s
    b = -s / 2 - eps / s
    # Φ(a) − e^ε Φ(b) = Φ(a) (1 − exp(ε + logΦ(b) − logΦ(a)))
    la, lb = float(log_ndtr(a)), float(log_ndtr(b))
    diff = eps + lb - la
    if diff >= 0:  # rounding at the boundary; the true value is ≥ 0
        return 0.0
    return float(math.exp(la) * -math.expm1(diff))


def _log_delta(epsilon: float, pcost: float) -> float:
    d = delta_from_epsilon(epsilon, pcost)
    return math.log(d) if d > 0 else -math.inf


def epsilon_from_delta(delta: float, pcost: float) -> float:
    """Smallest ε with δ(ε) ≤ ``delta`` for a mechanism of privacy cost ``pcost``."""
    d = _check_positive("delta", delta)
    if d >= 1:
        raise BudgetError(f"delta must be below 1, got {delta!r}")
    p = _check_positive("pcost", pcost)
    if delta_from_epsilon(0.0, p) <= d:
        return 0.0
    hi = 1.0
    while delta_from_epsilon(hi, p) > d:
        hi *= 2.0
        if hi > 1e12:  # pragma: no cover - unreachable for finite inputs
            raise BudgetError("could not bracket epsilon; pcost is too large")
    from scipy.optimize import brentq

    ld = math.log(d)
    return float(brentq(lambda e: _log_delta(e, p) - ld, 0.0, hi, xtol=1e-14, rtol=1e-14))


def pcost_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """Largest privacy cost whose exact (ε, δ) curve passes below ``delta`` at ``epsilon``."""
    e = _check_positive("epsilon", epsilon)
    d = _check_positive("delta", delta)
    if d >= 1:
        raise BudgetError(f"delta must be below 1, got {delta!r}")
    lo, hi = 1e-12, 1.0
    while delta_from_epsilon(e, hi) < d:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:  # pragma: no cover
            raise BudgetError("could not bracket the privacy cost")
    from scipy.optimize import brentq

    ld = math.log(d)
    # log δ is increasing in pcost; solve in log(pcost) for good relative accuracy
    f = lambda lp: _log_delta(e, math.exp(lp)) - ld  # noqa: E731
    llo = math.log(lo)
    while f(llo) > 0:
        llo -= 5.0
    return float(math.exp(brentq(f, llo, math.log(hi), xtol=1e-14, rtol=1e-14)))


def epsilon_from_zcdp(rho: float, delta: float) -> float:
    """ε of (ε, δ)-DP implied by ρ-zCDP alone (Canonne, Kamath, Steinke 2020, Prop. 12):
    ``δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α``, i.e.
    ``ε = min_{α>1} αρ + (α log(1 − 1/α) − log(α − 1) − log δ) / (α − 1)``.

    Use it for mechanisms known only to be zCDP — the discrete Gaussian — where the exact
    continuous-Gaussian curve of :func:`epsilon_from_delta` is not established. It is never
    smaller than that curve and never larger than Bun–Steinke's ``ρ + 2 sqrt(ρ log(1/δ))``.
    """
    r = _check_positive("rho", rho)
    d = _check_positive("delta", delta)
    if d >= 1:
        raise BudgetError(f"delta must be below 1, got {delta!r}")

    def eps(t: float) -> float:  # α = 1 + e^t
        a = 1.0 + math.exp(t)
        return a * r + (a * math.log1p(-1.0 / a) - t - math.log(d)) / (a - 1.0)

    return max(_golden_min(eps, -30.0, 30.0, 1e-12), 0.0)


def _golden_min(f, lo: float, hi: float, xatol: float) -> float:
    """The minimum value of a unimodal ``f`` on ``[lo, hi]`` by golden-section search (in plain
    Python: stating ε is done by every command that reads a release, which must not pay for
    importing an optimization library)."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    while b - a > xatol:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return min(fc, fd, f(0.5 * (a + b)))


#: How (ε, δ) is stated for each noise kind (see :mod:`dpmatrix._accounting` for the sources):
#: the continuous Gaussian's exact analytic curve, the discrete Gaussian's zCDP conversion.
ANALYTIC = "analytic_gaussian"
DISCRETE_ZCDP = "discrete_gaussian_zcdp"
PURE = "pure"
NOISE_ACCOUNTING = {
    "gaussian": ANALYTIC,
    "gaussian_float": ANALYTIC,
    "discrete_gaussian": DISCRETE_ZCDP,
    "lattice_gaussian": DISCRETE_ZCDP,
    "auto": DISCRETE_ZCDP,  # the secure default noise is discrete (lattice noise is accounted alike)
    "discrete_laplace": PURE,
}


def accounting_of(noise: str | None) -> str:
    """The accounting of a noise kind (``None`` and ``"auto"``: the secure default, discrete).

    Examples
    --------
    >>> accounting_of("auto"), accounting_of("gaussian_float")
    ('discrete_gaussian_zcdp', 'analytic_gaussian')
    """
    key = "auto" if noise is None else noise
    if key not in NOISE_ACCOUNTING:
        raise BudgetError(f"unknown noise kind {noise!r}; expected one of {', '.join(NOISE_ACCOUNTING)}")
    return NOISE_ACCOUNTING[key]


def stated_epsilon(pcost: float, delta: float, accounting: str) -> float:
    """THE ε stated at ``delta`` for noise of privacy cost ``pcost`` (ρ = pcost/2) under an
    accounting of :data:`NOISE_ACCOUNTING`: the analytic Gaussian curve
    (:func:`epsilon_from_delta`) or the zCDP conversion (:func:`epsilon_from_zcdp`).

    Examples
    --------
    >>> round(stated_epsilon(1.0, 1e-9, ANALYTIC), 5), round(stated_epsilon(1.0, 1e-9, DISCRETE_ZCDP), 5)
    (6.17394, 6.47407)
    """
    if accounting == ANALYTIC:
        return epsilon_from_delta(delta, pcost)
    if accounting == DISCRETE_ZCDP:
        return epsilon_from_zcdp(_check_positive("pcost", pcost) / 2.0, delta)
    raise BudgetError(f"no (epsilon, delta) curve for {accounting!r} accounting")


def _zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ with ``epsilon_from_zcdp(ρ, δ) ≤ ε``: Canonne–Kamath–Steinke's Corollary 13 solved
    for ρ, ``max_{α>1} (ε − c(α))/α`` with ``c(α) = (α log(1 − 1/α) − log(α − 1) − log δ)/(α − 1)``
    (every α gives a valid ρ)."""
    from scipy.optimize import minimize_scalar

    ld = math.log(delta)

    def neg(t: float) -> float:  # α = 1 + e^t
        a = 1.0 + math.exp(t)
        return -(epsilon - (a * math.log1p(-1.0 / a) - t - ld) / (a - 1.0)) / a

    res = minimize_scalar(neg, bounds=(-30.0, 30.0), method="bounded", options={"xatol": 1e-12})
    return -float(res.fun)


def approx_pcost(epsilon: float, delta: float, accounting: str = DISCRETE_ZCDP) -> float:
    """The largest privacy cost whose stated ε (:func:`stated_epsilon`) at ``delta`` is at most
    ``epsilon`` under ``accounting`` — the conversion of an (ε, δ) budget.

    The result is checked with the function that states it and lowered by relative steps of
    1e-12 until the check passes, so the statement never exceeds the ask in floating point.

    Examples
    --------
    >>> p = approx_pcost(1.0, 1e-9)
    >>> stated_epsilon(p, 1e-9, DISCRETE_ZCDP) <= 1.0 < stated_epsilon(p * (1 + 1e-6), 1e-9, DISCRETE_ZCDP)
    True
    """
    e = _check_positive("epsilon", epsilon)
    d = _check_positive("delta", delta)
    if d >= 1:
        raise BudgetError(f"delta must be below 1, got {delta!r}")
    if accounting == ANALYTIC:
        p = pcost_from_epsilon_delta(e, d)
    elif accounting == DISCRETE_ZCDP:
        p = 2.0 * _zcdp_rho(e, d)
    else:
        raise BudgetError(f"an (epsilon, delta) budget cannot be converted under {accounting!r} accounting")
    if not p > 0:
        raise BudgetError(f"epsilon = {e:g} at delta = {d:g} admits no positive privacy cost")
    for _ in range(100_000):
        if stated_epsilon(p, d, accounting) <= e:
            return p
        p *= 1.0 - 1e-12
    raise BudgetError("could not convert the (epsilon, delta) budget")  # pragma: no cover


@dataclass(frozen=True)
class Budget:
    """A privacy budget, stored as the privacy cost ``pcost`` and reported in every unit.

    The privacy cost of a Gaussian plan is ``pcost = max diag(Bᵀ Σ⁻¹ B)`` (ResidualPlanner §3);
    it is ``2ρ`` for ρ-zCDP and ``μ²`` for μ-GDP, and determines (ε, δ)-DP through the exact
    analytic Gaussian curve (Balle & Wang 2018).

    Parameters
    ----------
    pcost : float
        The privacy cost, positive and finite.

    Raises
    ------
    BudgetError
        If the value is not a positive finite number.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> dm.Budget.zcdp(0.5).pcost
    1.0
    >>> dm.Budget.gdp(2).rho
    2.0
    >>> round(dm.Budget.approx(1.0, 1e-6, noise="gaussian").epsilon(1e-6), 6)
    1.0
    >>> b = dm.Budget.pure(1.0)
    >>> (b.pure_epsilon, b.epsilon(0), b.rho)
    (1.0, 1.0, 0.5)
    """

    pcost: float
    # set by Budget.pure: the ε of pure ε-DP (δ = 0); pcost is then ε² (ρ = ε²/2 for composition)
    pure_epsilon: float | None = None
    # set by Budget.approx: the accounting the asked (ε, δ) was converted with (one of
    # NOISE_ACCOUNTING's values) and the asked (ε, δ) itself; None for ρ, μ and pcost budgets,
    # which hold for every noise kind
    accounting: str | None = None
    asked: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pcost", _check_positive("pcost", self.pcost))
        if self.pure_epsilon is not None:
            object.__setattr__(self, "pure_epsilon", _check_positive("epsilon", self.pure_epsilon))

    def holds_for(self, noise: str) -> bool:
        """Whether a release drawing ``noise`` states ε at most the asked one: always for ρ, μ,
        pcost and pure budgets and for (ε, δ) converted with the zCDP conversion (valid for every
        noise kind); for (ε, δ) converted with the continuous Gaussian's analytic curve, only
        when continuous noise is drawn (discrete noise is stated through zCDP, a larger ε).

        Examples
        --------
        >>> b = Budget.approx(1.0, 1e-9, noise="gaussian")
        >>> b.holds_for("gaussian"), b.holds_for("discrete_gaussian"), Budget.zcdp(1).holds_for("auto")
        (True, False, True)
        """
        return self.accounting != ANALYTIC or accounting_of(noise) == ANALYTIC

    @classmethod
    def pure(cls, epsilon: float) -> Budget:
        """Pure ε-DP (δ = 0), planned by the pure ε-DP planner with Laplace-type noise.

        It reports ε at every δ and ρ = ε²/2 (pure ε-DP implies (ε²/2)-zCDP, Bun & Steinke
        2016, Proposition 1.4) for composition with zCDP releases; no μ-GDP is claimed.

        Parameters
        ----------
        epsilon : float
            Positive and finite.

        Returns
        -------
        Budget

        Raises
        ------
        BudgetError
            ε not a positive finite number.

        Examples
        --------
        >>> Budget.pure(0.5).rho
        0.125
        """
        eps = _check_positive("epsilon", epsilon)
        return cls(eps * eps, pure_epsilon=eps)

    @property
    def is_pure(self) -> bool:
        """True for a pure ε-DP budget (:meth:`pure`)."""
        return self.pure_epsilon is not None

    @classmethod
    def zcdp(cls, rho: float) -> Budget:
        """ρ-zCDP: ``pcost = 2ρ``."""
        return cls(resolve_pcost(rho=rho))

    @classmethod
    def gdp(cls, mu: float) -> Budget:
        """μ-Gaussian DP: ``pcost = μ²``."""
        return cls(resolve_pcost(mu=mu))

    @classmethod
    def approx(cls, epsilon: float, delta: float, noise: str = "auto") -> Budget:
        """(ε, δ)-DP: the largest ``pcost`` whose stated ε at ``δ`` is at most ``ε`` for the noise
        that will be drawn (:func:`approx_pcost`).

        ``noise="auto"`` (the secure default, also right for ``"discrete_gaussian"`` and
        ``"lattice_gaussian"``) converts with the discrete Gaussian's zCDP conversion, valid for
        every noise kind; ``noise="gaussian"`` with the continuous Gaussian's exact curve — then
        measure with ``noise="gaussian_float"`` (discrete noise would state a larger ε).

        Examples
        --------
        >>> Budget.approx(1.0, 1e-9).pcost < Budget.approx(1.0, 1e-9, noise="gaussian").pcost
        True
        """
        accounting = accounting_of(noise)
        return cls(approx_pcost(epsilon, delta, accounting), accounting=accounting,
                   asked=(float(epsilon), float(delta)))

    @property
    def rho(self) -> float:
        """ρ of ρ-zCDP (``pcost / 2``)."""
        return self.pcost / 2.0

    @property
    def mu(self) -> float:
        """μ of μ-Gaussian DP (``sqrt(pcost)``); a pure ε-DP budget claims none."""
        if self.pure_epsilon is not None:
            raise BudgetError("a pure epsilon-DP budget claims no mu-GDP; report epsilon (or rho = epsilon^2/2)")
        return math.sqrt(self.pcost)

    def epsilon(self, delta: float, noise: str = "gaussian") -> float:
        """ε of (ε, δ)-DP at the given δ for noise of kind ``noise`` (the pure ε at any δ).

        The default is the continuous Gaussian's claim (exact analytic curve); releases draw
        secure discrete noise by default, whose guarantee is ``epsilon(delta, noise="auto")``
        (the zCDP conversion, :func:`stated_epsilon`) — what manifests and ``dpmatrix plan``
        state.

        Examples
        --------
        >>> b = Budget.zcdp(0.5)
        >>> round(b.epsilon(1e-9), 5), round(b.epsilon(1e-9, noise="auto"), 5)
        (6.17394, 6.47407)
        """
        if self.pure_epsilon is not None:
            return self.pure_epsilon
        return stated_epsilon(self.pcost, delta, accounting_of(noise))

    def delta(self, epsilon: float) -> float:
        """δ of (ε, δ)-DP at the given ε (0 at or above a pure budget's ε)."""
        if self.pure_epsilon is not None:
            if float(epsilon) >= self.pure_epsilon:
                return 0.0
            raise BudgetError(f"a pure epsilon-DP budget states delta = 0 at epsilon >= {self.pure_epsilon}")
        return delta_from_epsilon(epsilon, self.pcost)


def resolve_pcost(
    pcost: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    budget: Budget | None = None,
) -> float:
    """Turn exactly one of the accepted budget forms into a privacy cost.

    Accepted: ``pcost``; ``rho`` (zCDP, pcost = 2ρ); ``mu`` (GDP, pcost = μ²); both
    ``epsilon`` and ``delta`` (approximate DP, converted with the accounting of the secure default
    noise, :func:`approx_pcost`, so a release states ε at most the asked one whatever noise it
    draws); or a :class:`Budget`.
    """
    given = {
        k: v
        for k, v in dict(pcost=pcost, rho=rho, epsilon=epsilon, delta=delta, mu=mu).items()
        if v is not None
    }
    forms = []
    if budget is not None:
        if not isinstance(budget, Budget):
            raise BudgetError(
                f"budget= takes a dpmatrix.Budget (e.g. Budget.zcdp(0.5)), got {type(budget).__name__}"
            )
        forms.append("budget")
    if "pcost" in given:
        forms.append("pcost")
    if "rho" in given:
        forms.append("rho")
    if "mu" in given:
        forms.append("mu")
    if "epsilon" in given or "delta" in given:
        forms.append("epsilon/delta")
    if not forms:
        raise BudgetError(
            "no privacy budget given: pass one of pcost=, rho=, mu=, epsilon= with delta=, "
            "or budget=dpmatrix.Budget.zcdp(...)"
        )
    if len(forms) > 1:
        raise BudgetError(f"give exactly one privacy budget, got {' and '.join(forms)}")
    if budget is not None:
        if budget.is_pure:
            raise BudgetError(
                "a pure epsilon-DP budget (Budget.pure) is planned by the pure planner: "
                "dpmatrix.plan(workload, budget=Budget.pure(eps)), not by a Gaussian planner"
            )
        return budget.pcost
    if "pcost" in given:
        return _check_positive("pcost", pcost)
    if "rho" in given:
        return 2.0 * _check_positive("rho", rho)
    if "mu" in given:
        return _check_positive("mu", mu) ** 2
    if epsilon is None or delta is None:
        raise BudgetError("approximate DP needs both epsilon= and delta=")
    # converted for the secure default noise (discrete): valid for every noise kind; a user who
    # will draw continuous noise passes budget=Budget.approx(eps, delta, noise="gaussian")
    return approx_pcost(epsilon, delta, DISCRETE_ZCDP)



class PrivacyReport:
    """Mixin for anything with a privacy :class:`Budget` (``self.budget``): reports it in every
    unit — ``pcost``, ``rho``, ``mu``, ``epsilon(delta)``, ``delta(epsilon)``."""

    budget: Budget

    @property
    def pcost(self) -> float:
        """Privacy cost (largest diagonal of Bᵀ Σ⁻¹ B, Definition 2)."""
        return self.budget.pcost

    @property
    def rho(self) -> float:
        """ρ-zCDP parameter (pcost / 2)."""
        return self.budget.rho

    @property
    def mu(self) -> float:
        """μ-Gaussian-DP parameter (sqrt(pcost))."""
        return self.budget.mu

    def epsilon(self, delta: float, noise: str = "gaussian") -> float:
        """ε of (ε, δ)-DP at ``delta``: the continuous Gaussian's claim (exact analytic
        conversion) by default; ``noise="auto"`` for the secure default noise a release draws
        (:meth:`Budget.epsilon`)."""
        return self.budget.epsilon(delta, noise)

    def delta(self, epsilon: float) -> float:
        """δ of (ε, δ)-DP at ``epsilon``."""
        return self.budget.delta(epsilon)
