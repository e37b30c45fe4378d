/* Device side of the stm32ai validation protocol, version 1 (docs/uart_protocol.md).
 *
 * Frame: A5 5A | version u8 | type u8 | seq u16 | length u32 | payload | crc32 u32, little-endian;
 * the CRC covers version..payload. The receiver is a byte-at-a-time state machine:
 *  - outside a frame it discards everything until the two magic bytes (resynchronisation);
 *  - inside a frame every byte must arrive within byte_timeout_ms of the previous one, else the
 *    partial frame is dropped (with a TIMEOUT error once its header is known), so a truncated
 *    frame never wedges the loop;
 *  - a frame is only acted on when its CRC matches: a corrupted request gets an ERROR reply (or,
 *    when its header is unreadable, nothing), never a wrong answer.
 * RUN payloads are received straight into the model's input tensors (no extra RAM); replies are
 * streamed from the output tensors with the CRC computed on the fly. */
#include "ai_validation.h"

#include <string.h>

#define MAGIC0 0xA5u
#define MAGIC1 0x5Au
#define HDR_SIZE 10u
#define SCRATCH_SIZE 64u     /* payload bytes kept for requests other than RUN */
#define MIN_MAX_PAYLOAD 64u  /* accepted payload length even for models with tiny inputs */

enum {
  T_HELLO = 0x01,
  T_RUN = 0x02,
  T_BYE = 0x03,
  T_PROFILE = 0x04, /* per-layer counts of the last RUN (firmware built with -DAI_PROFILE) */
  T_RUN_MODEL = 0x05, /* RUN addressed to a model: u8 model index, then its inputs */
  T_ERROR = 0x7F,
  T_REPLY = 0x80 /* reply type = request type | T_REPLY */
};

enum {
  E_BAD_CRC = 1,
  E_BAD_LENGTH = 2,
  E_UNKNOWN_TYPE = 3,
  E_PAYLOAD_SIZE = 4,
  E_VERSION = 5,
  E_RUN_FAILED = 6,
  E_NO_MODEL = 7, /* model index beyond the firmware's models */
  E_TIMEOUT = 8    /* a frame stopped mid-way (inter-byte timeout): dropped, the host may resend */
};

typedef struct {
  ai_handle h;
  const ai_validation_cfg *cfg;
  uint32_t in_total;     /* sum of the input tensors' bytes */
  uint32_t out_total;
  uint32_t max_payload;  /* longest request accepted */
  uint32_t cur;          /* the model addressed (index into cfg->models; 0 for a single model) */
  int ready;             /* the current model's I/O tensors all have buffers */
  uint8_t scratch[SCRATCH_SIZE];
  uint32_t tx_crc;
} server_t;

static const uint32_t s_crc_nibble[16] = {
  0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u,
  0x4DB26158u, 0x5005713Cu, 0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
  0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};

/* Nibble-table CRC: 64 bytes of table instead of 1 KiB, fast enough at UART speed. */
uint32_t ai_validation_crc32(uint32_t crc, const uint8_t *p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    crc = (crc >> 4) ^ s_crc_nibble[crc & 0xFu];
    crc = (crc >> 4) ^ s_crc_nibble[crc & 0xFu];
  }
  return ~crc;
}

static void put_le16(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v) {
  put_le16(p, v);
  put_le16(p + 2, v >> 16);
}

static uint32_t get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* ---- receiving ---- */

/* Next byte, or -1 when none arrived within the inter-byte timeout. */
static int read_byte(const server_t *s) {
  const ai_validation_cfg *c = s->cfg;
  uint64_t start = c->now();
  uint32_t ms = c->byte_timeout_ms != 0u ? c->byte_timeout_ms : AI_VAL_BYTE_TIMEOUT_MS;
  uint64_t limit = (uint64_t)c->ticks_per_ms * ms;
  for (;;) {
    int b = c->poll_byte();
    if (b >= 0) {
      return b;
    }
    if (c->now() - start > limit) {
      return -1;
    }
  }
}

/* Where the i-th payload byte of a RUN request goes: the input tensors, in order. */
static uint8_t *input_byte(const server_t *s, uint32_t i) {
  int32_t n = ai_get_input_size(s->h);
  for (int32_t k = 0; k < n; k++) {
    ai_tensor *t = ai_get_input(s->h, k);
    if (i < t->size_bytes) {
      return (uint8_t *)t->data + i;
    }
    i -= t->size_bytes;
  }
  return NULL;
}

/* ---- sending ---- */

static void tx(server_t *s, const uint8_t *p, size_t n) {
  s->tx_crc = ai_validation_crc32(s->tx_crc, p, n);
  s->cfg->write(p, n);
}

static void begin_reply(server_t *s, uint8_t type, uint16_t seq, uint32_t len) {
  uint8_t hdr[HDR_SIZE] = {MAGIC0, MAGIC1, AI_VAL_PROTOCOL_VERSION, type, 0, 0, 0, 0, 0, 0};
  put_le16(hdr + 4, seq);
  put_le32(hdr + 6, len);
  s->cfg->write(hdr, 2);
  s->tx_crc = 0u;
  tx(s, hdr + 2, HDR_SIZE - 2u);
}

static void end_reply(server_t *s) {
  uint8_t crc[4];
  put_le32(crc, s->tx_crc);
  s->cfg->write(crc, sizeof crc);
}

static void send_error(server_t *s, uint16_t seq, uint8_t code, uint8_t req_type, uint32_t detail) {
  uint8_t p[8] = {code, req_type, 0, 0, 0, 0, 0, 0};
  put_le32(p + 4, detail);
  begin_reply(s, T_ERROR, seq, sizeof p);
  tx(s, p, sizeof p);
  end_reply(s);
}

static uint32_t str_len(const char *str) {
  size_t n = str != NULL ? strlen(str) : 0u;
  return n > 255u ? 255u : (uint32_t)n;
}

static void tx_str(server_t *s, const char *str) {
  uint8_t n = (uint8_t)str_len(str);
  tx(s, &n, 1);
  if (n != 0u) {
    tx(s, (const uint8_t *)str, n);
  }
}

static uint32_t tensor_desc_size(const ai_tensor *t) {
  return 8u + 4u * (uint32_t)(t->ndim > 0 ? t->ndim : 0);
}

static void tx_tensor_desc(server_t *s, const ai_tensor *t) {
  uint8_t d[8] = {t->dtype.code, t->dtype.bits, (uint8_t)(t->ndim > 0 ? t->ndim : 0), 0, 0, 0, 0, 0};
  put_le32(d + 4, t->size_bytes);
  tx(s, d, sizeof d);
  for (int32_t i = 0; i < t->ndim; i++) {
    uint8_t dim[4];
    put_le32(dim, (uint32_t)t->shape[i]);
    tx(s, dim, sizeof dim);
  }
}

static uint32_t n_models(const server_t *s) {
  return s->cfg->models != NULL ? s->cfg->n_models : 0u;
}

static const char *model_name(const server_t *s) {
  return n_models(s) != 0u ? s->cfg->models[s->cur].name : s->cfg->model;
}

static void reply_hello(server_t *s, uint16_t seq) {
  const ai_validation_cfg *c = s->cfg;
  int32_t n_in = ai_get_input_size(s->h), n_out = ai_get_output_size(s->h);
  uint32_t len = 16u + 3u + str_len(model_name(s)) + str_len(c->board) + str_len(c->tool_version);
  if (n_models(s) != 0u) { /* the model list: u8 described model, u8 count, names */
    len += 2u;
    for (uint32_t k = 0; k < n_models(s); k++) {
      len += 1u + str_len(c->models[k].name);
    }
  }
  for (int32_t i = 0; i < n_in; i++) {
    len += tensor_desc_size(ai_get_input(s->h, i));
  }
  for (int32_t i = 0; i < n_out; i++) {
    len += tensor_desc_size(ai_get_output(s->h, i));
  }
  uint8_t fixed[16] = {0};
  put_le32(fixed, n_models(s) != 0u ? c->models[s->cur].signature : c->signature);
  put_le32(fixed + 4, c->cpu_hz);
  put_le32(fixed + 8, s->max_payload);
  fixed[12] = (uint8_t)n_in;
  fixed[13] = (uint8_t)n_out;
  fixed[14] = (uint8_t)(c->flags | (n_models(s) != 0u ? AI_VAL_FLAG_MODELS : 0u));
  begin_reply(s, T_HELLO | T_REPLY, seq, len);
  tx(s, fixed, sizeof fixed);
  tx_str(s, model_name(s));
  tx_str(s, c->board);
  tx_str(s, c->tool_version);
  for (int32_t i = 0; i < n_in; i++) {
    tx_tensor_desc(s, ai_get_input(s->h, i));
  }
  for (int32_t i = 0; i < n_out; i++) {
    tx_tensor_desc(s, ai_get_output(s->h, i));
  }
  if (n_models(s) != 0u) {
    uint8_t m[2] = {(uint8_t)s->cur, (uint8_t)n_models(s)};
    tx(s, m, sizeof m);
    for (uint32_t k = 0; k < n_models(s); k++) {
      tx_str(s, c->models[k].name);
    }
  }
  end_reply(s);
}

static uint64_t count_of(const ai_validation_cfg *c, uint64_t ticks) {
  return c->to_count != NULL ? c->to_count(ticks) : ticks;
}

static void put_le64(uint8_t *p, uint64_t v) {
  put_le32(p, (uint32_t)v);
  put_le32(p + 4, (uint32_t)(v >> 32));
}

/* PROFILE reply: u32 n, then n x (u16 graph.json node, u16 0, u64 count) of the last RUN. */
static void reply_profile(server_t *s, uint16_t seq) {
  const ai_validation_cfg *c = s->cfg;
  uint32_t n = c->profile_counts != NULL && c->profile_nodes != NULL ? c->profile_n : 0u;
  uint8_t b[12] = {0};
  put_le32(b, n);
  begin_reply(s, T_PROFILE | T_REPLY, seq, 4u + 12u * n);
  tx(s, b, 4u);
  for (uint32_t k = 0; k < n; k++) {
    put_le16(b, c->profile_nodes[k]);
    put_le16(b + 2, 0u);
    put_le64(b + 4, count_of(c, c->profile_counts[k]));
    tx(s, b, sizeof b);
  }
  end_reply(s);
}

static void do_run(server_t *s, uint16_t seq, uint8_t type) {
  /* each inference starts from the initial state (stateful models), as the references do */
  if (ai_reset(s->h) != AI_OK) {
    send_error(s, seq, E_RUN_FAILED, type, 0u);
    return;
  }
  uint64_t t0 = s->cfg->now();
  ai_status st = ai_run(s->h);
  uint64_t cycles = count_of(s->cfg, s->cfg->now() - t0);
  if (st != AI_OK) {
    send_error(s, seq, E_RUN_FAILED, type, (uint32_t)st);
    return;
  }
  uint8_t c[8];
  put_le64(c, cycles);
  begin_reply(s, (uint8_t)(type | T_REPLY), seq, 8u + s->out_total);
  tx(s, c, sizeof c);
  for (int32_t i = 0; i < ai_get_output_size(s->h); i++) {
    ai_tensor *t = ai_get_output(s->h, i);
    tx(s, (const uint8_t *)t->data, t->size_bytes);
  }
  end_reply(s);
}

/* Sizes of the I/O; 0 when some tensor has no buffer (nothing can then be run). */
static int io_ready(server_t *s) {
  s->in_total = 0u;
  s->out_total = 0u;
  int ok = 1;
  for (int32_t i = 0; i < ai_get_input_size(s->h); i++) {
    ai_tensor *t = ai_get_input(s->h, i);
    ok = ok && t != NULL && t->data != NULL;
    s->in_total += t != NULL ? t->size_bytes : 0u;
  }
  for (int32_t i = 0; i < ai_get_output_size(s->h); i++) {
    ai_tensor *t = ai_get_output(s->h, i);
    ok = ok && t != NULL && t->data != NULL;
    s->out_total += t != NULL ? t->size_bytes : 0u;
  }
  return ok;
}

/* Makes model k the one requests address (its handle and I/O sizes). */
static void select_model(server_t *s, uint32_t k) {
  s->cur = k;
  if (n_models(s) != 0u) {
    s->h = s->cfg->models[k].h;
  }
  s->ready = io_ready(s);
}

int ai_validation_serve(ai_handle h, const ai_validation_cfg *cfg) {
  if (h == NULL || cfg == NULL || cfg->poll_byte == NULL || cfg->write == NULL || cfg->now == NULL) {
    return -1;
  }
  static server_t s; /* static: keeps the scratch buffer off the stack */
  memset(&s, 0, sizeof s);
  s.h = h;
  s.cfg = cfg;
  s.max_payload = MIN_MAX_PAYLOAD;
  for (uint32_t k = 0; k < n_models(&s); k++) { /* RUN_MODEL: the index byte, then the inputs */
    if (cfg->models[k].h == NULL) {
      return -1;
    }
    select_model(&s, k);
    if (s.in_total + 1u > s.max_payload) {
      s.max_payload = s.in_total + 1u;
    }
  }
  select_model(&s, 0u);
  if (s.in_total > s.max_payload) {
    s.max_payload = s.in_total;
  }

  for (;;) {
    /* Idle: wait for the first magic byte (this wait is for the host, not inside a frame). */
    int b = s.cfg->poll_byte();
    if (b != (int)MAGIC0) {
      continue;
    }
    do {
      b = read_byte(&s);
    } while (b == (int)MAGIC0);
    if (b != (int)MAGIC1) {
      continue; /* garbage or timeout: back to hunting for the magic */
    }
    uint8_t hdr[HDR_SIZE] = {MAGIC0, MAGIC1};
    uint32_t i;
    for (i = 2u; i < HDR_SIZE; i++) {
      b = read_byte(&s);
      if (b < 0) {
        break;
      }
      hdr[i] = (uint8_t)b;
    }
    if (i < HDR_SIZE) {
      continue; /* truncated header: dropped */
    }
    uint8_t version = hdr[2], type = hdr[3];
    uint16_t seq = (uint16_t)(hdr[4] | (hdr[5] << 8));
    uint32_t len = get_le32(hdr + 6);
    if (version != AI_VAL_PROTOCOL_VERSION) {
      send_error(&s, seq, E_VERSION, type, AI_VAL_PROTOCOL_VERSION);
      continue;
    }
    if (len > s.max_payload) {
      send_error(&s, seq, E_BAD_LENGTH, type, s.max_payload);
      continue;
    }
    /* Payload: a RUN of the right size lands in the input tensors, anything else in scratch
     * (bytes past the scratch are only checksummed). */
    if (type == T_RUN && s.cur != 0u) {
      select_model(&s, 0u); /* RUN addresses model 0 (a single-model host) */
    }
    int to_inputs = type == T_RUN && len == s.in_total && s.ready;
    uint32_t skip = 0u; /* RUN_MODEL: the inputs start after the model index byte */
    uint32_t crc = ai_validation_crc32(0u, hdr + 2, HDR_SIZE - 2u);
    for (i = 0u; i < len; i++) {
      b = read_byte(&s);
      if (b < 0) {
        break;
      }
      uint8_t v = (uint8_t)b;
      crc = ai_validation_crc32(crc, &v, 1);
      if (i == 0u && type == T_RUN_MODEL && v < n_models(&s)) {
        select_model(&s, v); /* a corrupted index is harmless: nothing runs before the CRC check */
        to_inputs = len == s.in_total + 1u && s.ready;
        skip = 1u;
      }
      if (to_inputs && i >= skip) {
        *input_byte(&s, i - skip) = v;
      } else if (i < SCRATCH_SIZE) {
        s.scratch[i] = v;
      }
    }
    if (i < len) {
      /* Truncated payload: dropped, and said so (the header told us whom to tell), so a host
       * whose bytes stalled (a loaded PC, an emulator starved of CPU) resends at once instead
       * of waiting for a reply that cannot come. */
      send_error(&s, seq, E_TIMEOUT, type, i);
      continue;
    }
    uint8_t tail[4];
    for (i = 0u; i < 4u; i++) {
      b = read_byte(&s);
      if (b < 0) {
        break;
      }
      tail[i] = (uint8_t)b;
    }
    if (i < 4u) {
      send_error(&s, seq, E_TIMEOUT, type, len);
      continue;
    }
    if (get_le32(tail) != crc) {
      send_error(&s, seq, E_BAD_CRC, type, 0u);
      continue;
    }
    switch (type) {
      case T_HELLO: /* payload: empty (model 0), or u8 the model to describe */
        if (len >= 1u && s.scratch[0] >= (n_models(&s) != 0u ? n_models(&s) : 1u)) {
          send_error(&s, seq, E_NO_MODEL, type, n_models(&s));
          break;
        }
        select_model(&s, len >= 1u ? s.scratch[0] : 0u);
        reply_hello(&s, seq);
        break;
      case T_RUN:
        if (!s.ready) {
          send_error(&s, seq, E_RUN_FAILED, type, 0u);
        } else if (len != s.in_total) {
          send_error(&s, seq, E_PAYLOAD_SIZE, type, s.in_total);
        } else {
          do_run(&s, seq, type);
        }
        break;
      case T_RUN_MODEL:
        if (n_models(&s) == 0u) {
          send_error(&s, seq, E_UNKNOWN_TYPE, type, 0u); /* as a single-model firmware */
        } else if (len < 1u || s.scratch[0] >= n_models(&s)) {
          send_error(&s, seq, E_NO_MODEL, type, n_models(&s));
        } else if (!s.ready) {
          send_error(&s, seq, E_RUN_FAILED, type, 0u);
        } else if (len != s.in_total + 1u) {
          send_error(&s, seq, E_PAYLOAD_SIZE, type, s.in_total + 1u);
        } else {
          do_run(&s, seq, type);
        }
        break;
      case T_PROFILE:
        if (cfg->profile_n == 0u) {
          send_error(&s, seq, E_UNKNOWN_TYPE, type, 0u); /* as a firmware without profiling */
        } else {
          reply_profile(&s, seq);
        }
        break;
      case T_BYE:
        begin_reply(&s, T_BYE | T_REPLY, seq, 0u);
        end_reply(&s);
        return 0;
      default:
        send_error(&s, seq, E_UNKNOWN_TYPE, type, 0u);
        break;
    }
  }
}
