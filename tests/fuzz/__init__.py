"""Structure-aware fuzzer of `stm32ai generate --c-only` (see docs/verifier.md)."""
