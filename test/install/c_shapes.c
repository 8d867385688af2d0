/* The shapes and attributes cxx_shapes.cc builds, built by C's macros for comparison. */
#include <stddef.h>

#include <pebble/pebble.h>

void c_shapes(pbl_shape *s, pbl_attr *a, size_t batch, const int64_t *ints);

void c_shapes(pbl_shape *s, pbl_attr *a, size_t batch, const int64_t *ints)
{
    s[0] = PBL_SHAPE(4, 1);
    s[1] = PBL_SHAPE(batch, 784);
    s[2] = PBL_SHAPE(2, 3, 4, 5, 6, 7);
    s[3] = PBL_SHAPE(1, 2, 3, 4, 5, 6, 7); /* one dimension too many: ndim -1 */
    s[4] = PBL_SCALAR;
    a[0] = PBL_ATTR_INT("axis", -1);
    a[1] = PBL_ATTR_FLOAT("alpha", 0.25);
    a[2] = PBL_ATTR_INTS("perm", ints, 3);
}
