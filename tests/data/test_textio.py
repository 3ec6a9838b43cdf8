"""The byte-level field parser against plain Python on arbitrary fields."""
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.data.textio import Fields

FIELD = st.text(alphabet="0123456789abcdefABCDEF-xz ", max_size=21)


def py_int(s):
    if s == "":
        return 0, False
    body = s[1:] if s.startswith("-") else s
    if not body or not body.isdigit() or len(body) > 18:
        return None, True
    return int(s), False


def py_hex(s):
    if s == "":
        return 0, False
    if len(s) > 8 or any(c not in "0123456789abcdefABCDEF" for c in s):
        return None, True
    return int(s, 16), False


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(FIELD, min_size=3, max_size=3), min_size=1, max_size=20))
def test_fields_parse_like_python(rows):
    buf = "\n".join("\t".join(r) for r in rows).encode()
    f = Fields(buf, b"\t", 3)
    assert len(f) == len(rows)
    for j, (conv, parse) in enumerate([(py_int, f.integer), (py_hex, f.hex), (None, f.label)]):
        vals, bad = parse(j)
        for i, r in enumerate(rows):
            assert f.text(i, j) == r[j]
            if conv is None:
                assert bool(bad[i]) == (r[j] not in ("0", "1"))
                if not bad[i]:
                    assert vals[i] == int(r[j])
                continue
            want, want_bad = conv(r[j])
            assert bool(bad[i]) == want_bad, (r[j], bad[i])
            if not want_bad:
                assert int(vals[i]) == want
