"""grove's tree core against jax.tree_util and optree on random trees.

trees_driver.cpp fills a few dozen C++ tree types from a seeded generator and prints, per tree, its
own serialization of the tree (tuples, lists, dicts with string and integer keys, None, registered
structs with data and static fields, empty containers) and grove's answers. This script rebuilds
each tree out of Python objects (the structs as dataclasses registered with
jax.tree_util.register_dataclass and with optree), asks jax.tree_util and optree the same
questions, and compares:

- the leaves in order (jax and optree), str(treedef) (jax: grove prints what JAX prints),
  num_leaves and num_nodes (jax and optree), treedef_is_leaf;
- key paths: keystr(path) and keystr(path, simple=True, separator="/") (jax), and the keys of
  optree's tree_paths;
- tree_map over two trees (the tree and a fuller tree that has it as a prefix) and over three
  (the tree, one of the same structure, and the fuller one), with jax and optree;
- treedef.flatten_up_to(fuller tree) (jax and optree) and broadcasting the tree onto the fuller
  one (optree's tree_broadcast_prefix, its structure printed by jax);
- a mutated tree of the same C++ type: whether the structures are equal, and whether tree_map and
  flatten_up_to raise (grove must throw exactly where jax and optree raise, and otherwise give
  their results). One difference is intended and counted: where the first tree has a leaf (an
  engaged std::optional) and the other None (an empty one), jax and optree call f(leaf, None);
  grove's f has static argument types, so grove throws tree_error there.

Usage: trees_oracle.py DRIVER TREES_PER_FAMILY SEED
"""
import dataclasses
import json
import sys
import time

import jax
import optree
from jax import tree_util as jtu

import oracle_common

NAMESPACE = "grove"

# The registered structs of trees_driver.cpp: name -> (data fields in registration order, meta
# fields). Declaration order does not matter to a pytree; the registration order is the leaf order.
STRUCTS = {
    "Point": (["x", "y"], []),
    "Conv": (["w"], ["name", "stride"]),
    "Norm": (["scale"], ["eps", "affine"]),
    "Block": (["items", "bias"], []),
    "Tag": ([], ["id"]),
    "Reord": (["b", "a"], []),
}


CLASSES = {}
for _name, (_data, _meta) in STRUCTS.items():
    _cls = dataclasses.make_dataclass(_name, [(f, object) for f in _data + _meta])
    _cls.__module__ = __name__
    globals()[_name] = _cls
    jtu.register_dataclass(_cls, data_fields=list(_data), meta_fields=list(_meta))

    def _flatten(o, data=_data, meta=_meta):
        return [getattr(o, f) for f in data], tuple(getattr(o, f) for f in meta), list(data)

    def _unflatten(aux, children, cls=_cls, data=_data, meta=_meta):
        return cls(**dict(zip(data, children)), **dict(zip(meta, aux)))

    optree.register_pytree_node(_cls, _flatten, _unflatten, namespace=NAMESPACE)
    CLASSES[_name] = _cls


def build(v):
    """The Python object a driver serialization describes."""
    if v is None or (isinstance(v, int) and not isinstance(v, bool)):
        return v
    if isinstance(v, list):
        return [build(x) for x in v]
    if "t" in v:
        return tuple(build(x) for x in v["t"])
    if "d" in v and "c" not in v:
        return {k: build(x) for k, x in v["d"]}
    if "c" in v:
        data, meta = STRUCTS[v["c"]]
        got_data = [f for f, _ in v["d"]]
        got_meta = [f for f, _ in v["m"]]
        if got_data != data or got_meta != meta:
            raise ValueError(f"{v['c']}: fields {got_data} / {got_meta}, expected {data} / {meta}")
        fields = {f: build(x) for f, x in v["d"]}
        fields.update({f: static_value(x) for f, x in v["m"]})
        return CLASSES[v["c"]](**fields)
    raise ValueError(f"not a tree description: {v!r}")


def static_value(x):
    if isinstance(x, dict):
        return float(x["f"])
    return x


def same(a, b):
    """Equality that also tells tuples from lists and bools from ints, and dataclasses by type."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return a == b


def jax_sum(s):
    return sum(jtu.tree_leaves(s))


def optree_sum(s):
    return sum(optree.tree_leaves(s, namespace=NAMESPACE))


def map_recording_none(tree_map, leaf_sum, tree, other):
    """tree_map(f, tree, other) (or 'raised'), and whether f was given None as other's subtree."""
    saw_none = []

    def f(x, s):
        if s is None:
            saw_none.append(True)
        return x * 1000 + leaf_sum(s)

    result = raises(lambda: tree_map(f, tree, other))
    return result, bool(saw_none) and result != "raised"


def raises(fn):
    """fn's result, or the string 'raised' if it raised ValueError/TypeError (a structure error)."""
    try:
        return fn()
    except (ValueError, TypeError):
        return "raised"


class Checker:
    def __init__(self):
        self.verdict = oracle_common.Verdict("grove trees vs jax.tree_util and optree")
        self.failures = {}   # what -> count
        self.examples = {}   # what -> first few messages
        self.counts = {}     # what -> checks
        self.documented = 0  # trees where jax calls f(leaf, None) and grove throws

    def check(self, what, ok, message):
        self.counts[what] = self.counts.get(what, 0) + 1
        if not ok:
            self.failures[what] = self.failures.get(what, 0) + 1
            self.examples.setdefault(what, [])
            if len(self.examples[what]) < 3:
                self.examples[what].append(message)

    def finish(self):
        for what in self.counts:
            n = self.counts[what]
            bad = self.failures.get(what, 0)
            msg = f"{what}: {bad} of {n} trees disagree" + (
                "\n    " + "\n    ".join(self.examples[what]) if bad else "")
            self.verdict.expect(bad == 0, msg)
            if not bad:
                self.verdict.note(f"{what}: {n} trees agree")
        self.verdict.finish()


def compare(c: Checker, r: dict):
    tag = f"family {r['family']} seed {r['seed']}"
    tree = build(r["tree"])
    b = build(r["b"])
    full = build(r["full"])
    mutated = build(r["mutated"])

    # Leaves, structure, counts.
    leaves, treedef = jtu.tree_flatten(tree)
    oleaves, ospec = optree.tree_flatten(tree, namespace=NAMESPACE)
    c.check("leaves (jax)", leaves == r["leaves"], f"{tag}: grove {r['leaves']}, jax {leaves}")
    c.check("leaves (optree)", oleaves == r["leaves"], f"{tag}: grove {r['leaves']}, optree {oleaves}")
    c.check("str(treedef) (jax)", str(treedef) == r["treedef"],
            f"{tag}: grove {r['treedef']}, jax {treedef}")
    c.check("num_leaves (jax, optree)",
            treedef.num_leaves == r["num_leaves"] == ospec.num_leaves,
            f"{tag}: grove {r['num_leaves']}, jax {treedef.num_leaves}, optree {ospec.num_leaves}")
    c.check("num_nodes (jax, optree)", treedef.num_nodes == r["num_nodes"] == ospec.num_nodes,
            f"{tag}: {r['treedef']}: grove {r['num_nodes']}, jax {treedef.num_nodes}, "
            f"optree {ospec.num_nodes}")
    c.check("treedef_is_leaf (jax)", jtu.treedef_is_leaf(treedef) == r["is_leaf"],
            f"{tag}: {r['treedef']}: grove {r['is_leaf']}")
    c.check("tree_unflatten round trip", r["unflatten_same"], f"{tag}: {r['treedef']}")

    # Key paths.
    with_path, _ = jtu.tree_flatten_with_path(tree)
    paths = [jtu.keystr(p) for p, _ in with_path]
    simple = [jtu.keystr(p, simple=True, separator="/") for p, _ in with_path]
    c.check("keystr (jax)", paths == r["paths"], f"{tag}: grove {r['paths']}, jax {paths}")
    c.check("keystr simple (jax)", simple == r["simple_paths"],
            f"{tag}: grove {r['simple_paths']}, jax {simple}")
    opaths = ["/".join(str(k) for k in p) for p in optree.tree_paths(tree, namespace=NAMESPACE)]
    c.check("tree_paths (optree)", opaths == r["simple_paths"],
            f"{tag}: grove {r['simple_paths']}, optree {opaths}")

    # tree_map over two and three trees.
    map2 = build(r["map2"])
    j2 = jtu.tree_map(lambda x, s: x * 1000 + jax_sum(s), tree, full)
    o2 = optree.tree_map(lambda x, s: x * 1000 + optree_sum(s), tree, full, namespace=NAMESPACE)
    c.check("tree_map of 2 trees (jax)", same(map2, j2), f"{tag}: grove {map2}, jax {j2}")
    c.check("tree_map of 2 trees (optree)", same(map2, o2), f"{tag}: grove {map2}, optree {o2}")
    map3 = build(r["map3"])
    j3 = jtu.tree_map(lambda x, y, s: x + 10 * y + 100 * jax_sum(s), tree, b, full)
    o3 = optree.tree_map(lambda x, y, s: x + 10 * y + 100 * optree_sum(s), tree, b, full,
                         namespace=NAMESPACE)
    c.check("tree_map of 3 trees (jax)", same(map3, j3), f"{tag}: grove {map3}, jax {j3}")
    c.check("tree_map of 3 trees (optree)", same(map3, o3), f"{tag}: grove {map3}, optree {o3}")

    # flatten_up_to and broadcast_prefix.
    up_to = [build(x) for x in r["up_to"]]
    jup = treedef.flatten_up_to(full)
    oup = ospec.flatten_up_to(full)
    c.check("flatten_up_to (jax)", same(up_to, list(jup)), f"{tag}: grove {up_to}, jax {jup}")
    c.check("flatten_up_to (optree)", same(up_to, list(oup)), f"{tag}: grove {up_to}, optree {oup}")
    bcast = build(r["broadcast"])
    obcast = optree.tree_broadcast_prefix(tree, full, namespace=NAMESPACE)
    c.check("tree_broadcast_prefix (optree)", same(bcast, obcast),
            f"{tag}: grove {bcast}, optree {obcast}")
    c.check("broadcast_prefix leaves (optree)",
            jtu.tree_leaves(bcast) == optree.broadcast_prefix(tree, full, namespace=NAMESPACE),
            f"{tag}: grove {jtu.tree_leaves(bcast)}")
    c.check("str(treedef) of the broadcast (jax)",
            str(jtu.tree_structure(obcast)) == r["broadcast_treedef"],
            f"{tag}: grove {r['broadcast_treedef']}, jax {jtu.tree_structure(obcast)}")

    # The mutated tree: equal structures, and errors exactly where jax and optree raise.
    mdef = jtu.tree_structure(mutated)
    c.check("treedef == (jax)", (treedef == mdef) == r["mutated_equal"],
            f"{tag}: grove {r['mutated_equal']}: {treedef} vs {mdef}")
    if r["mutated_equal"]:
        c.check("equal treedefs hash equal", r["mutated_hash_equal"], f"{tag}: {treedef}")
    grove_map = r["map_mutated"]
    grove_map = grove_map if grove_map == "raised" else build(grove_map)
    jm, j_none = map_recording_none(jtu.tree_map, jax_sum, tree, mutated)
    om, o_none = map_recording_none(
        lambda f, *trees: optree.tree_map(f, *trees, namespace=NAMESPACE), optree_sum, tree, mutated)
    # The one intended difference: where the first tree has a leaf (an engaged std::optional) and
    # the other None (an empty one), jax and optree call f(leaf, None); grove's f has static
    # argument types, so it throws tree_error instead (README, "Where C++ differs from JAX").
    documented = grove_map == "raised" and (j_none or o_none)
    c.check("tree_map mismatch (jax)", same(grove_map, jm) or (documented and j_none),
            f"{tag}: {treedef} vs {mdef}: grove {grove_map}, jax {jm}")
    c.check("tree_map mismatch (optree)", same(grove_map, om) or (documented and o_none),
            f"{tag}: {treedef} vs {mdef}: grove {grove_map}, optree {om}")
    c.documented += bool(documented)
    grove_up = r["up_to_mutated"]
    grove_up = grove_up if grove_up == "raised" else [build(x) for x in grove_up]
    ju = raises(lambda: list(treedef.flatten_up_to(mutated)))
    ou = raises(lambda: list(ospec.flatten_up_to(mutated)))
    c.check("flatten_up_to mismatch (jax)", same(grove_up, ju),
            f"{tag}: {treedef} vs {mdef}: grove {grove_up}, jax {ju}")
    c.check("flatten_up_to mismatch (optree)", same(grove_up, ou),
            f"{tag}: {treedef} vs {mdef}: grove {grove_up}, optree {ou}")
    return grove_map == "raised"


def main():
    driver, per_family, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    start = time.perf_counter()
    records = oracle_common.run_driver(driver, per_family, seed)
    driver_s = time.perf_counter() - start
    # Split on "\n" only: splitlines() would also split inside keys that hold U+0085 or U+2028.
    lines = records["trees"].split("\n")[:-1]
    c = Checker()
    c.verdict.expect(len(lines) == int(records["count"]) and len(lines) >= 10000,
                     f"{len(lines)} trees (the driver counted {records['count']}); at least 10000 wanted")
    structures = set()
    raised = 0
    for line in lines:
        r = json.loads(line)
        structures.add(r["treedef"])
        raised += compare(c, r)
    c.verdict.note(f"{len(lines)} trees, {len(structures)} distinct structures, "
                   f"{raised} structure mismatches raised ({c.documented} of them where jax "
                   f"and optree call f(leaf, None) instead); driver {driver_s:.2f} s, "
                   f"all {time.perf_counter() - start:.2f} s (jax {jax.__version__}, "
                   f"optree {optree.__version__})")
    c.verdict.expect(raised > 0.1 * len(lines) and raised < 0.9 * len(lines),
                     f"the mutated trees should raise in some cases and not in others: {raised}")
    c.finish()


if __name__ == "__main__":
    main()
