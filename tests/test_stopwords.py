"""The copied stop-word list is scikit-learn's, word for word."""

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as SKLEARN_STOP_WORDS

from newsflow.text.stopwords import ENGLISH_STOP_WORDS


def test_copy_equals_scikit_learn() -> None:
    assert ENGLISH_STOP_WORDS == SKLEARN_STOP_WORDS
