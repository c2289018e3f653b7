"""Design decisions: views of one Plan or several that a cluster architect weighs before a purchase.

    catalog.py   the parts catalog (--catalog): part, price and watts per model, located errors
    cost.py      the bill of materials (design/bom.py) priced; unpriced lines make totals unknown
    growth.py    nodes a plane takes before an existing cable moves
    fabric.py    one plane's cables read once for counting: switch Gb/s, pods, classes of nodes
    failures.py  the worst leaf, spine, core and cable to lose, per plane
    figures.py   every figure of one design
    compare.py   designs side by side, the rows that differ marked; Markdown
    memo.py      the last Plan's failures and headroom kept (plan asks twice)
"""
