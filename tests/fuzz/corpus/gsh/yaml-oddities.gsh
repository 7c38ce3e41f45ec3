a: &x [1, 2]
b: *x
---
c: !!str d
? [complex]
: key
