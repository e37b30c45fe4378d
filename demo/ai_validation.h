/* Device side of the stm32ai validation protocol (docs/uart_protocol.md).
 *
 * The host sends a model's inputs in binary frames; the device runs the model and returns the
 * outputs with the cycle (hardware) or instruction (emulator) count of the inference, and on
 * request its per-layer counts. The code is board-independent: byte I/O and
 * the clock come in through ai_validation_cfg, so it builds unchanged for any target (and with
 * a host compiler). No malloc; every wait inside a frame is bounded by an inter-byte timeout. */
#ifndef AI_VALIDATION_H
#define AI_VALIDATION_H

#include <stddef.h>
#include <stdint.h>

#include "ai_runtime.h"

#define AI_VAL_PROTOCOL_VERSION 1u
/* Default inter-byte timeout: a partial frame is dropped after this much silence. */
#define AI_VAL_BYTE_TIMEOUT_MS 50u

/* HELLO flags */
#define AI_VAL_FLAG_DWT 0x01u      /* cycles are DWT core cycles (else SysTick ticks) */
#define AI_VAL_FLAG_EMULATED 0x02u /* an emulated board (QEMU): counts are instructions */
#define AI_VAL_FLAG_PROFILE 0x04u  /* per-layer counts available (PROFILE request) */
#define AI_VAL_FLAG_MODELS 0x08u   /* several models: HELLO lists them, RUN_MODEL addresses one */

/* One model of a multi-model firmware (ai_validation_cfg.models). */
typedef struct {
  ai_handle h;
  const char *name;
  uint32_t signature; /* its model signature computed at generate time */
} ai_validation_model;

typedef struct {
  int (*poll_byte)(void);                        /* a received byte, or -1 at once if none */
  void (*write)(const uint8_t *buf, size_t len); /* raw bytes, no newline translation */
  uint64_t (*now)(void);                         /* monotonic cycle counter */
  uint32_t ticks_per_ms;                         /* now() ticks per millisecond */
  uint32_t byte_timeout_ms; /* max gap between two bytes of a frame; 0: AI_VAL_BYTE_TIMEOUT_MS */
  uint32_t cpu_hz;
  uint32_t signature; /* model signature computed at generate time */
  uint8_t flags;      /* AI_VAL_FLAG_* */
  const char *model;  /* model name */
  const char *board;  /* board id */
  const char *tool_version;
  /* Optional. now() ticks -> the reported count (instructions on emulated boards); NULL: ticks. */
  uint64_t (*to_count)(uint64_t ticks);
  /* Optional per-layer profile of the last run (models built with -DAI_PROFILE): profile_n
   * entries of now() ticks and their graph.json node indices; profile_n 0: none. */
  const uint64_t *profile_counts;
  const uint16_t *profile_nodes;
  uint32_t profile_n;
  /* Optional: the models of a multi-model firmware (n_models >= 1; model 0 is the one HELLO
   * without payload, RUN and PROFILE address). NULL/0: the single model `h` of ai_validation_serve,
   * described by `signature` and `model`. */
  const ai_validation_model *models;
  uint32_t n_models;
} ai_validation_cfg;

/* Serves requests on `h` (cfg->models[0].h for a multi-model firmware) until the host sends BYE; then returns 0. Returns -1 at once when the
 * configuration is unusable (NULL callbacks, no handle). */
int ai_validation_serve(ai_handle h, const ai_validation_cfg *cfg);

/* CRC-32 (IEEE 802.3, reflected, polynomial 0x04C11DB7): pass 0 to start, the previous result
 * to continue. crc32("123456789") == 0xCBF43926. */
uint32_t ai_validation_crc32(uint32_t crc, const uint8_t *p, size_t n);

#endif /* AI_VALIDATION_H */
