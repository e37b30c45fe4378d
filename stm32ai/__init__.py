"""stm32ai: TensorFlow Lite models to self-contained STM32 firmware projects."""

__version__ = "0.1.0"
API_VERSION = "1.1"
