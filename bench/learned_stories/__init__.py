"""The learned story decision, measured against the flow's cascade and not shipped: a logistic
pair model over (article, candidate story) features, trained by ``bench/train_story_model.py``
and cross-validated leave-one-day-out by ``bench/cv_stories.py`` (its figures: ``bench/RESULTS.md``;
why the flow keeps the cascade: ``docs/decisions/0007-story-decision-stays-the-cascade.md``)."""
