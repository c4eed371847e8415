"""redact() reads the environment's secrets as they are at each call, though it caches which
variable names hold secrets (per set of names)."""

from runjob_core.redact import redact


def test_secrets_follow_the_environment_as_it_changes(monkeypatch):
    monkeypatch.setenv("LAB_API_KEY", "first-secret-value")
    assert redact("a first-secret-value b") == "a *** b"
    monkeypatch.setenv("LAB_API_KEY", "second-secret-value")  # same names, new value
    assert redact("first-secret-value second-secret-value") == "first-secret-value ***"
    monkeypatch.setenv("CLUSTER_PASSWORD", "hunter2-long")  # a new name
    assert redact("hunter2-long") == "***"
    monkeypatch.delenv("CLUSTER_PASSWORD")
    assert redact("hunter2-long") == "hunter2-long"
    monkeypatch.setenv("PLAIN_SETTING", "plain-long-value")  # not a secret's name: kept
    assert redact("plain-long-value second-secret-value") == "plain-long-value ***"
