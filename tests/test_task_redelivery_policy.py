"""Every task is redone when its worker dies, and the deployment guide says why that is safe."""

from __future__ import annotations

from pathlib import Path

from accelboard.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[1]


def test_every_task_runs_again_when_its_worker_dies_and_the_docs_say_why() -> None:
    celery_app.loader.import_default_modules()
    names = sorted(name for name in celery_app.tasks if name.startswith("accelboard."))
    assert len(names) >= 19
    guide = (ROOT / "docs" / "deployment.md").read_text()
    section = guide.split("## Tasks run again when their worker dies", 1)[1].split("\n## ", 1)[0]
    undocumented = []
    for name in names:
        task = celery_app.tasks[name]
        assert task.acks_late is True, name
        assert task.reject_on_worker_lost is True, name
        function = name.rsplit(".", 1)[1]
        if f"`{function}`" not in section and f".{function}`" not in section:
            undocumented.append(name)
    assert undocumented == [], "docs/deployment.md does not say why these are safe to redo"
