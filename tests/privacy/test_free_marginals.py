"""Free-attribute noisy marginals: exact noise on counts, add/remove sensitivities, no division by a private n."""

from __future__ import annotations

import numpy as np
import pytest

from dq_engine import Dataset, Domain, make_rng
from dq_engine.oracle.free_attributes import (
    gaussian_count_sigma,
    gaussian_one_way_marginals,
    gaussian_sensitivity_squared,
    noisy_one_way_marginals,
)
from dq_engine.privacy.noise import discrete_gaussian, discrete_laplace


@pytest.fixture
def mixed_data() -> Dataset:
    domain = Domain.categorical({"flag": 2, "colour": 3, "constant": 1, "size": 4})
    codes = make_rng(1).integers(0, domain.sizes, size=(40, 4))
    return Dataset.from_codes(domain, codes)


def test_sensitivities_per_neighbouring_relation(mixed_data: Dataset):
    domain = mixed_data.domain
    assert gaussian_sensitivity_squared(domain) == 1 + 2 + 0 + 2  # replace-one: ones only for binary
    assert gaussian_sensitivity_squared(domain, neighbouring="add-remove") == 3  # one cell of each measured table
    assert gaussian_count_sigma(domain, rho=0.5, neighbouring="add-remove") == pytest.approx(np.sqrt(3.0))


def test_add_remove_gaussian_marginals_are_normalised_by_the_noisy_total(mixed_data: Dataset):
    data = mixed_data.with_neighbouring("add-remove")
    marginals, event = gaussian_one_way_marginals(data, rho=0.5, rng=make_rng(2))
    # the same draws, by hand: every cell of every attribute with >= 2 values, one discrete Gaussian call
    counts = data.one_way_counts()
    measured = [0, 1, 3]
    noisy = discrete_gaussian(np.concatenate([counts[j] for j in measured]), sigma=np.sqrt(3.0), rng=make_rng(2))
    blocks = np.split(noisy, np.cumsum([len(counts[j]) for j in measured])[:-1])
    for j, block in zip(measured, blocks, strict=True):
        clipped = np.clip(block, 0, None).astype(float)
        np.testing.assert_allclose(marginals[j], clipped / clipped.sum())
    np.testing.assert_array_equal(marginals[2], [1.0])
    assert event.rho == 0.5


@pytest.mark.parametrize("neighbouring,cells", [("replace-one", 2), ("add-remove", 1)])
def test_laplace_marginals_use_the_relation_s_l1_sensitivity(mixed_data: Dataset, neighbouring: str, cells: int):
    data = mixed_data.with_neighbouring(neighbouring)
    marginals, _ = noisy_one_way_marginals(data, epsilon=2.0, rng=make_rng(4))
    counts = data.one_way_counts()
    noisy = discrete_laplace(np.concatenate(counts), scale=cells * 4 / 2.0, rng=make_rng(4))
    for marginal, block in zip(marginals, np.split(noisy, np.cumsum([len(c) for c in counts])[:-1]), strict=True):
        clipped = np.clip(block, 0, None).astype(float)
        expected = clipped / clipped.sum() if clipped.sum() > 0 else np.full(len(block), 1 / len(block))
        np.testing.assert_allclose(marginal, expected)


def test_a_dataset_refuses_an_unknown_neighbouring_relation(mixed_data: Dataset):
    from dq_engine.errors import DomainError

    with pytest.raises(DomainError, match=r"neighbouring \('swap'\) must be 'replace-one' or 'add-remove'"):
        mixed_data.with_neighbouring("swap")
