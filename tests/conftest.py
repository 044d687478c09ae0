"""Tests mirror the packages (``tests/store/`` for ``rewardsmith.store``, ...). This folder is on
``sys.path`` for every test (pytest puts a conftest's folder there), so the helpers every
folder shares import by name: ``support`` (speed, servers, environments), ``rescore_rewards``
and ``testing_broken_rewards``; data lives beside them (``data/``, ``fixtures/``)."""
