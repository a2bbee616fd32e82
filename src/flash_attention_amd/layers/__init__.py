"""Layers of ``flash_attn.layers`` that code built on flash_attn imports: ``rotary``."""
