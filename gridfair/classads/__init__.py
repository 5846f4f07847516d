"""ClassAds in, pool views out.

- `reader`: ad files in `-long` (old), new and `-json` syntax, parsed with classad2;
- `views`: ads as `gridfair.ad_views` machines and jobs, and `read_snapshot`;
- `matching`: symmetric Requirements matching, evaluated once per autocluster;
- `to_pool`: a snapshot as the core's pool, with a negotiator over it;
- `synthetic`: generated pools of ads for tests and benchmarks.

Nothing is imported here, so reading ads does not load the policies.
"""
