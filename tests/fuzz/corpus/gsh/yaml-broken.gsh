builds:
  b:
	- tab
  "bad\0nul": 1
