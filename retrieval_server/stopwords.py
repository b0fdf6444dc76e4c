"""English function words: too common to tell documents apart, so query analysis, entity matching
and metadata search leave them out."""

from __future__ import annotations

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it its
    may might more most much not of on or our out over should so some such than that the their them then there these
    they this those to too under up us was we were what when where which while who whom why will with would you your
    also about after all any because before between both each few further here just many no nor only other own same
    very via using used use""".split()
)
