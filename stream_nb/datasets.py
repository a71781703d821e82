"""Small seeded synthetic streams, standard library only.

Every generator takes a ``seed`` and a number of events ``n`` and returns an
iterator of ``(x, y)`` pairs, ``x`` a fresh dict per event. The same seed gives
the same stream on every platform (only :class:`random.Random` is used). They
feed the CLI demo, the benchmarks and the tests.

=====================  ==============================================  ==================
generator              features                                        suits
=====================  ==============================================  ==================
:func:`agrawal`        6 numeric + 3 nominal (Agrawal et al., 1993)    ``NaiveBayes``
:func:`zipf_text`      token -> count, Zipf-distributed vocabulary     ``MultinomialNB`` …
:func:`categorical_stream`  hashable values drawn from a true NB model  ``CategoricalNB``
:func:`mixed_stream`   str, bool and float features                    ``NaiveBayes``
=====================  ==============================================  ==================
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from stream_nb._exceptions import ConfigError

__all__ = ["agrawal", "categorical_stream", "mixed_stream", "zipf_text"]

Event = tuple[dict[str, Any], Any]


def _check_int(value: Any, name: str, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_probability(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def _check_range(value: Any, name: str) -> tuple[int, int]:
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        or not 1 <= value[0] <= value[1]
    ):
        raise ConfigError(
            f"{name} must be a pair of integers (low, high), 1 <= low <= high, got {value!r}"
        )
    return value


# --------------------------------------------------------------------------- Agrawal
# The ten classification functions of Agrawal, Imielinski & Swami, "Database
# Mining: A Performance Perspective", IEEE TKDE 5(6), 1993, Table 2 (F1…F10).
# Each returns True for "Group A". As in MOA's AgrawalGenerator, Group A is
# label 0 and every other event label 1.


class _Applicant(NamedTuple):
    """The attributes a classification function reads."""

    salary: float
    commission: float
    age: int
    elevel: int
    hvalue: float
    hyears: int
    loan: float


def _in(low: float, value: float, high: float) -> bool:
    return low <= value <= high


def _income_band(age: int, income: float) -> bool:
    """F2's test of the salary and F6's of the salary plus commission."""
    if age < 40:
        return _in(50_000, income, 100_000)
    if age < 60:
        return _in(75_000, income, 125_000)
    return _in(25_000, income, 75_000)


def _f1(a: _Applicant) -> bool:
    return a.age < 40 or a.age >= 60


def _f2(a: _Applicant) -> bool:
    return _income_band(a.age, a.salary)


def _f3(a: _Applicant) -> bool:
    if a.age < 40:
        return a.elevel in (0, 1)
    if a.age < 60:
        return a.elevel in (1, 2, 3)
    return a.elevel in (2, 3, 4)


def _f4(a: _Applicant) -> bool:
    age, elevel, salary = a.age, a.elevel, a.salary
    if age < 40:
        return _in(25_000, salary, 75_000) if elevel in (0, 1) else _in(50_000, salary, 100_000)
    if age < 60:
        return _in(50_000, salary, 100_000) if elevel in (1, 2, 3) else _in(75_000, salary, 125_000)
    return _in(50_000, salary, 100_000) if elevel in (2, 3, 4) else _in(25_000, salary, 75_000)


def _f5(a: _Applicant) -> bool:
    age, salary, loan = a.age, a.salary, a.loan
    if age < 40:
        if _in(50_000, salary, 100_000):
            return _in(100_000, loan, 300_000)
        return _in(200_000, loan, 400_000)
    if age < 60:
        if _in(75_000, salary, 125_000):
            return _in(200_000, loan, 400_000)
        return _in(300_000, loan, 500_000)
    if _in(25_000, salary, 75_000):
        return _in(300_000, loan, 500_000)
    return _in(100_000, loan, 300_000)


def _f6(a: _Applicant) -> bool:
    return _income_band(a.age, a.salary + a.commission)


def _f7(a: _Applicant) -> bool:
    return 2.0 * (a.salary + a.commission) / 3.0 - a.loan / 5.0 - 20_000 > 0


def _f8(a: _Applicant) -> bool:
    return 2.0 * (a.salary + a.commission) / 3.0 - 5_000 * a.elevel - 20_000 > 0


def _f9(a: _Applicant) -> bool:
    return 2.0 * (a.salary + a.commission) / 3.0 - 5_000 * a.elevel - a.loan / 5.0 - 10_000 > 0


def _f10(a: _Applicant) -> bool:
    equity = a.hvalue * (a.hyears - 20) / 10.0 if a.hyears >= 20 else 0.0
    return 2.0 * (a.salary + a.commission) / 3.0 - 5_000 * a.elevel + equity / 5.0 - 10_000 > 0


_AGRAWAL_FUNCTIONS: dict[int, Callable[[_Applicant], bool]] = {
    1: _f1, 2: _f2, 3: _f3, 4: _f4, 5: _f5, 6: _f6, 7: _f7, 8: _f8, 9: _f9, 10: _f10,
}  # fmt: skip


def agrawal(
    seed: int, n: int, function: int = 1, *, perturbation: float = 0.0, nominal: bool = True
) -> Iterator[Event]:
    """The Agrawal et al. (1993) loan-approval stream: 9 features, 2 classes.

    Attributes follow the paper (Table 1) and MOA's ``AgrawalGenerator``:
    ``salary`` ~ U(20k, 150k); ``commission`` 0 if salary ≥ 75k else
    U(10k, 75k); ``age`` uniform integer 20…80; ``elevel`` 0…4; ``car`` 1…20;
    ``zipcode`` 0…8; ``hvalue`` ~ k × 100k × U(0.5, 1.5) with ``k = 9 − zipcode``;
    ``hyears`` 1…30; ``loan`` ~ U(0, 500k). The label is 0 for the paper's
    "Group A" under classification function ``F<function>`` and 1 otherwise.
    F5 follows the paper (it tests ``loan``); river's ``classification_function=4``
    tests ``salary`` in two places instead.

    Parameters
    ----------
    seed
        Seed of the :class:`random.Random` stream.
    n
        Number of events.
    function
        Classification function 1…10 (the paper's F1…F10, MOA's ``-f``;
        river's ``classification_function`` counts from 0).
    perturbation
        Noise level in [0, 1]: numeric attributes are moved by up to this
        fraction of their range (clipped), as in MOA ``-p``.
    nominal
        Emit ``elevel``, ``car`` and ``zipcode`` as strings (MOA treats them
        as nominal attributes; :class:`stream_nb.NaiveBayes` then models them
        as categorical). ``False`` emits ints, as river does.

    References
    ----------
    R. Agrawal, T. Imielinski and A. Swami, "Database Mining: A Performance
    Perspective", IEEE Transactions on Knowledge and Data Engineering 5(6),
    pp. 914-925, 1993.

    Examples
    --------
    >>> x, y = next(agrawal(seed=42, n=1, function=1))
    >>> sorted(x)
    ['age', 'car', 'commission', 'elevel', 'hvalue', 'hyears', 'loan', 'salary', 'zipcode']
    >>> x["age"], y
    (21, 0)
    >>> sum(y for _, y in agrawal(seed=1, n=1000, function=1))
    336
    """
    n = _check_int(n, "n", 0)
    if function not in _AGRAWAL_FUNCTIONS:
        raise ConfigError(f"function must be an integer 1…10 (Agrawal F1…F10), got {function!r}")
    perturbation = _check_probability(perturbation, "perturbation")
    return _agrawal(seed, n, _AGRAWAL_FUNCTIONS[function], perturbation, nominal)


def _agrawal(
    seed: int, n: int, label_of: Callable[[_Applicant], bool], perturbation: float, nominal: bool
) -> Iterator[Event]:
    rng = random.Random(seed)
    uniform = rng.random
    randint = rng.randint

    def perturb(value: float, low: float, high: float) -> float:
        value += (high - low) * (2.0 * uniform() - 1.0) * perturbation
        return min(max(value, low), high)

    for _ in range(n):
        salary = 20_000 + 130_000 * uniform()
        commission = 0.0 if salary >= 75_000 else 10_000 + 65_000 * uniform()
        age = randint(20, 80)
        elevel = randint(0, 4)
        car = randint(1, 20)
        zipcode = randint(0, 8)
        hvalue = (9 - zipcode) * 100_000 * (0.5 + uniform())
        hyears = randint(1, 30)
        loan = 500_000 * uniform()
        y = 0 if label_of(_Applicant(salary, commission, age, elevel, hvalue, hyears, loan)) else 1
        if perturbation > 0.0:
            salary = perturb(salary, 20_000, 150_000)
            if commission > 0:
                commission = perturb(commission, 10_000, 75_000)
            age = round(perturb(age, 20, 80))
            hvalue = perturb(hvalue, (9 - zipcode) * 50_000, (9 - zipcode) * 150_000)
            hyears = round(perturb(hyears, 1, 30))
            loan = perturb(loan, 0, 500_000)
        x: dict[str, Any] = {
            "salary": salary,
            "commission": commission,
            "age": age,
            "elevel": str(elevel) if nominal else elevel,
            "car": str(car) if nominal else car,
            "zipcode": str(zipcode) if nominal else zipcode,
            "hvalue": hvalue,
            "hyears": hyears,
            "loan": loan,
        }
        yield x, y


# --------------------------------------------------------------------------- text


def zipf_text(
    seed: int,
    n: int,
    vocabulary: int = 20_000,
    length: tuple[int, int] = (10, 60),
    classes: int = 2,
    *,
    exponent: float = 1.1,
    topic: float = 0.3,
) -> Iterator[Event]:
    """Bag-of-words documents: ``{token: count}`` with Zipf-distributed tokens.

    Each token of a document is drawn, with probability ``1 − topic``, from a
    Zipf law over the whole vocabulary shared by every class (``P(rank r) ∝
    r^-exponent``), and with probability ``topic`` from the same law over a
    class-specific random ordering of the vocabulary, so that frequent words
    differ by class. Tokens are named ``"w0"`` … ``"w<vocabulary-1>"``,
    labels are ``0 … classes-1`` (uniform).

    Parameters
    ----------
    seed
        Seed of the :class:`random.Random` stream.
    n
        Number of documents.
    vocabulary
        Number of distinct tokens.
    length
        ``(low, high)``: tokens per document, uniform between them.
    classes
        Number of labels.
    exponent
        Zipf exponent ``s > 0``.
    topic
        Share of class-specific draws in [0, 1] (0: classes are indistinguishable).

    Examples
    --------
    >>> docs = list(zipf_text(seed=7, n=3, vocabulary=100, length=(3, 5)))
    >>> [sum(x.values()) for x, _ in docs]
    [5, 4, 5]
    >>> all(isinstance(c, int) and c > 0 for x, _ in docs for c in x.values())
    True
    """
    n = _check_int(n, "n", 0)
    vocabulary = _check_int(vocabulary, "vocabulary", 1)
    classes = _check_int(classes, "classes", 1)
    low, high = _check_range(length, "length")
    topic = _check_probability(topic, "topic")
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or not exponent > 0:
        raise ConfigError(f"exponent must be a positive number, got {exponent!r}")
    return _zipf_text(seed, n, vocabulary, low, high, classes, float(exponent), topic)


def _zipf_text(
    seed: int, n: int, size: int, low: int, high: int, classes: int, exponent: float, topic: float
) -> Iterator[Event]:
    rng = random.Random(seed)
    tokens = [f"w{i}" for i in range(size)]
    cumulative = list(itertools.accumulate(r**-exponent for r in range(1, size + 1)))
    total = cumulative[-1]
    orderings = []
    for _ in range(classes):
        order = tokens[:]
        rng.shuffle(order)
        orderings.append(order)
    uniform = rng.random
    randint = rng.randint
    find = bisect.bisect_left
    last = size - 1
    for _ in range(n):
        y = randint(0, classes - 1)
        own = orderings[y]
        x: dict[str, Any] = {}
        for _ in range(randint(low, high)):
            rank = min(find(cumulative, uniform() * total), last)
            token = own[rank] if uniform() < topic else tokens[rank]
            x[token] = x.get(token, 0) + 1
        yield x, y


# --------------------------------------------------------------------------- categorical


def _dirichlet(rng: random.Random, k: int, concentration: float) -> list[float]:
    draws = [rng.gammavariate(concentration, 1.0) for _ in range(k)]
    total = sum(draws)
    return [d / total for d in draws]


def categorical_stream(
    seed: int,
    n: int,
    features: int = 10,
    values: int = 5,
    classes: int = 3,
    *,
    missing: float = 0.0,
    concentration: float = 1.0,
) -> Iterator[Event]:
    """Events drawn from a random categorical Naive Bayes model.

    Class priors and, per class and feature, the value distributions are
    drawn once from a symmetric Dirichlet(``concentration``); then each event
    draws its label and every feature independently given the label. Features
    are ``"f0"`` …, values ``"v0"`` …, labels ``"c0"`` ….

    Parameters
    ----------
    seed
        Seed of the :class:`random.Random` stream.
    n
        Number of events.
    features, values, classes
        Sizes of the model.
    missing
        Probability that a feature is left out of an event.
    concentration
        Dirichlet concentration: small values give peaked, easy-to-learn
        distributions.

    Examples
    --------
    >>> x, y = next(categorical_stream(seed=3, n=1, features=3))
    >>> sorted(x), y in {"c0", "c1", "c2"}
    (['f0', 'f1', 'f2'], True)
    """
    n = _check_int(n, "n", 0)
    features = _check_int(features, "features", 1)
    values = _check_int(values, "values", 1)
    classes = _check_int(classes, "classes", 1)
    missing = _check_probability(missing, "missing")
    if not (isinstance(concentration, (int, float)) and concentration > 0):
        raise ConfigError(f"concentration must be a positive number, got {concentration!r}")
    return _categorical(seed, n, features, values, classes, missing, float(concentration))


def _categorical(
    seed: int, n: int, features: int, values: int, classes: int, missing: float, conc: float
) -> Iterator[Event]:
    rng = random.Random(seed)
    labels = [f"c{k}" for k in range(classes)]
    names = [f"f{i}" for i in range(features)]
    value_names = [f"v{j}" for j in range(values)]
    prior = list(itertools.accumulate(_dirichlet(rng, classes, conc)))
    tables = [
        [list(itertools.accumulate(_dirichlet(rng, values, conc))) for _ in range(features)]
        for _ in range(classes)
    ]
    uniform = rng.random
    find = bisect.bisect_left
    for _ in range(n):
        k = min(find(prior, uniform() * prior[-1]), classes - 1)
        x: dict[str, Any] = {}
        for name, cumulative in zip(names, tables[k], strict=True):
            if missing and uniform() < missing:
                continue
            x[name] = value_names[min(find(cumulative, uniform() * cumulative[-1]), values - 1)]
        yield x, labels[k]


# --------------------------------------------------------------------------- mixed


def mixed_stream(
    seed: int,
    n: int,
    categorical: int = 3,
    numeric: int = 3,
    classes: int = 2,
    *,
    missing: float = 0.0,
) -> Iterator[Event]:
    """Events with string, boolean and float features, as real JSON events have.

    Per class: each categorical feature ``"cat<i>"`` follows a random
    distribution over 4 string values, the boolean ``"flag"`` is true with a
    class-specific probability, and each numeric feature ``"num<i>"`` is
    Gaussian with a class-specific mean in [-5, 5] and standard deviation in
    [0.5, 3]. Labels are ``"a"``, ``"b"`` … (at most 26 classes).

    Parameters
    ----------
    seed
        Seed of the :class:`random.Random` stream.
    n
        Number of events.
    categorical, numeric
        Number of string and float features (a boolean ``"flag"`` is added).
    classes
        Number of labels, 1…26.
    missing
        Probability that a feature is left out of an event.

    Examples
    --------
    >>> x, y = next(mixed_stream(seed=0, n=1))
    >>> sorted(x)
    ['cat0', 'cat1', 'cat2', 'flag', 'num0', 'num1', 'num2']
    >>> type(x["cat0"]).__name__, type(x["flag"]).__name__, type(x["num0"]).__name__
    ('str', 'bool', 'float')
    """
    n = _check_int(n, "n", 0)
    categorical = _check_int(categorical, "categorical", 0)
    numeric = _check_int(numeric, "numeric", 0)
    classes = _check_int(classes, "classes", 1)
    if classes > 26:
        raise ConfigError(f"classes must be at most 26, got {classes!r}")
    missing = _check_probability(missing, "missing")
    return _mixed(seed, n, categorical, numeric, classes, missing)


def _mixed(
    seed: int, n: int, categorical: int, numeric: int, classes: int, missing: float
) -> Iterator[Event]:
    rng = random.Random(seed)
    labels = [chr(ord("a") + k) for k in range(classes)]
    choices = ["red", "green", "blue", "grey"]
    cat_tables = [
        [list(itertools.accumulate(_dirichlet(rng, len(choices), 1.0))) for _ in range(categorical)]
        for _ in range(classes)
    ]
    flag_p = [rng.random() for _ in range(classes)]
    gauss = [
        [(rng.uniform(-5.0, 5.0), rng.uniform(0.5, 3.0)) for _ in range(numeric)]
        for _ in range(classes)
    ]
    uniform = rng.random
    find = bisect.bisect_left
    for _ in range(n):
        k = rng.randrange(classes)
        x: dict[str, Any] = {}
        for i, cumulative in enumerate(cat_tables[k]):
            if not (missing and uniform() < missing):
                x[f"cat{i}"] = choices[min(find(cumulative, uniform() * cumulative[-1]), 3)]
        if not (missing and uniform() < missing):
            x["flag"] = uniform() < flag_p[k]
        for i, (mean, std) in enumerate(gauss[k]):
            if not (missing and uniform() < missing):
                x[f"num{i}"] = rng.gauss(mean, std)
        yield x, labels[k]
