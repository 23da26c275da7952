"""Scoring a science team's final report, one concern per module.

* :mod:`.sections`: the report's text and structure, and which sections are substantive;
* :mod:`.extraction`: numbers, named methods and tests, and context phrases read from text;
* :mod:`.facts`: the ground truth's facts scored one by one, and the heuristic score;
* :mod:`.judge`: the LLM judge of Appendix L (its prompt is in ``prompts/``);
* :mod:`.agreement`: how far two scorers agree.

:mod:`cooplab.evals.science_scoring` is the entry point that re-exports what callers use.
"""
