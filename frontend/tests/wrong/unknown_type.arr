def f(x: float64, n: int) -> float64 = x
