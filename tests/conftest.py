"""Tests mirror the packages (``tests/store/`` for ``rewardsmith.store``, ...). This folder is on
``sys.path`` for every test (pytest puts a conftest's folder there), so the helpers every
folder shares import by name: ``support`` (speed, servers, environments), ``rescore_rewards``
and ``testing_broken_rewards``; data lives beside them (``data/``, ``fixtures/``)."""

from hypothesis import HealthCheck, settings

# Timing is for benchmarks, not tests: on a shared machine one slow draw (a stall of the whole
# machine) must not fail a property test, so Hypothesis' speed checks are off suite-wide.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")
