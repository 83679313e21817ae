"""Replay an archive through the whole file flow with the learned story decision in its story step.

    .venv/bin/python bench/replay_learned.py ARCHIVE OUT_DIR [--model FILE]

The flow's story step is the hand-tuned cascade (``StoryAssigner``); this runs the same flow (one
process) with :class:`~learned_stories.story_learned.LearnedStoryAssigner` and the model of
``--model`` (default: the shipped one) in its place, so that the digests of a held-out day can be
read and scored (``bench/score_briefs.py``) with a model not trained on it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from learned_stories.story_learned import LearnedStoryAssigner
from learned_stories.story_model import load_model

from newsflow.cli.main import run_file_flow
from newsflow.dedup.story_config import StoryConfig
from newsflow.flows.steps import stories


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("archive")
    ap.add_argument("out")
    ap.add_argument("--model", default=None)
    args = ap.parse_args()
    model = load_model(args.model)

    def learned(config: StoryConfig) -> LearnedStoryAssigner:
        return LearnedStoryAssigner(config, model=model)

    stories.StoryAssigner = learned  # type: ignore[misc,assignment]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    print(run_file_flow(args.archive, args.out))


if __name__ == "__main__":
    main()
