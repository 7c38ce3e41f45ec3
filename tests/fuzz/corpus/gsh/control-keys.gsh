"a\nb": 1
"c\td":
  - "x\u0001"
