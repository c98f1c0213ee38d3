def even(n: i64) -> bool = if n == 0 then true else odd(n - 1)
def odd(n: i64) -> bool = if n == 0 then false else even(n - 1)
