"""Graph-injected policy evaluation: the episode loop, policies, results, statistics and reports."""
