// pebble/pebble.h in a C++ translation unit: PBL_SHAPE, PBL_SCALAR and PBL_ATTR_* give what C's
// macros give (c_shapes.c) for the same arguments, a size_t dimension included.
#include <cstdio>
#include <cstring>

#include <pebble/pebble.h>

extern "C" void c_shapes(pbl_shape *s, pbl_attr *a, size_t batch, const int64_t *ints);

int main()
{
    size_t batch = 128;
    const int64_t ints[3] = { 2, 0, 1 };
    pbl_shape s[5], c[5];
    pbl_attr a[3], ca[3];
    s[0] = PBL_SHAPE(4, 1);
    s[1] = PBL_SHAPE(batch, 784);
    s[2] = PBL_SHAPE(2, 3, 4, 5, 6, 7);
    s[3] = PBL_SHAPE(1, 2, 3, 4, 5, 6, 7);
    s[4] = PBL_SCALAR;
    a[0] = PBL_ATTR_INT("axis", -1);
    a[1] = PBL_ATTR_FLOAT("alpha", 0.25);
    a[2] = PBL_ATTR_INTS("perm", ints, 3);
    c_shapes(c, ca, batch, ints);
    int fails = 0;
    for (int i = 0; i < 5; i++) {
        char cs[64], ccs[64];
        std::printf("PBL_SHAPE %d: C++ ndim %d %s, C ndim %d %s\n", i, (int)s[i].ndim,
                    pbl_shape_str(&s[i], cs, sizeof cs), (int)c[i].ndim, pbl_shape_str(&c[i], ccs, sizeof ccs));
        if (s[i].ndim != c[i].ndim || std::memcmp(s[i].dim, c[i].dim, sizeof s[i].dim) != 0)
            fails++;
    }
    for (int i = 0; i < 3; i++) {
        bool same = std::strcmp(a[i].name, ca[i].name) == 0 && a[i].type == ca[i].type && a[i].i == ca[i].i &&
                    a[i].f == ca[i].f && a[i].ints == ca[i].ints && a[i].n_ints == ca[i].n_ints;
        std::printf("PBL_ATTR %s: %s\n", a[i].name, same ? "same" : "DIFFERENT");
        fails += !same;
    }
    if (s[1].dim[0] != 128 || s[3].ndim != -1 || s[4].ndim != 0)
        fails++;
    std::printf("%s\n", fails ? "FAIL: C++ and C differ" : "C++ and C agree");
    return fails ? 1 : 0;
}
