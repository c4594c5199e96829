-- Substring filters keep to the trigram indexes (migration 0190) when their pattern is rare.
-- PostgreSQL estimates the rows of an unanchored pattern (LIKE / ILIKE '%…%': name__contains and
-- __icontains, description's, plain-text search) as the share of the column's histogram bounds it
-- matches, at least 0.01 % of the rows. With the default statistics target a histogram has 101
-- bounds, each a name ANALYZE sampled, so a substring of any one of them (any fragment of those
-- objects' names) was estimated at 1 % of the class. PostgreSQL then read the class in id order
-- until the page filled rather than take the trigram index: at 1,000,000 objects a fragment naming
-- one object took ~170–270 ms instead of ~1 ms, and which rare fragments did so changed with every
-- ANALYZE. With 1,001 bounds such a fragment is estimated at 0.1 %, which the trigram index serves;
-- a fragment common enough to fill a page early (in 2 bounds or more) still reads in id order.
-- The price: ANALYZE of objects samples 300,000 rows instead of 30,000, and planning a page with a
-- substring filter tests its pattern against 1,001 bounds of each column it names: ~0.05 ms more for
-- LIKE, ~0.25 ms more for ILIKE, which lowercases every bound (plain-text search, on names and
-- descriptions: ~0.5 ms). How rare a pattern must be estimated to take the index shrinks as a class
-- grows: beyond ~1.3 million objects of short rows in a class a fragment of a sampled name (0.1 %)
-- reads in id order again, which src/db/substring-stats.ts forestalls (bench/FINDINGS.md, 2026-12-02).
alter table objects alter column name set statistics 1000;
alter table objects alter column description set statistics 1000;
analyze objects (name, description);
