/* TFLite_Detection_PostProcess kernel (ai_kernels_detection.h, docs/kernels_detection.md). */
#include "ai_kernels_detection.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* The box maths rounds as TFLite Micro's C++ does, operation by operation: no fused
 * multiply-add (GCC contracts across statements with -std=gnu11 on an FPU that has VFMA), so a
 * borderline IoU compares the same on the host and the device. */
#if defined(__GNUC__) && !defined(__clang__)
#define AI_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define AI_NO_CONTRACT
#endif

typedef ai_detection_postprocess_f32_params dp_params;

typedef struct {
  float *decoded, *cls, *keep_s, *m_sc, *m_sc2;
  int32_t *keep_i, *order, *tmp, *selected, *m_idx, *m_ord;
  uint8_t *active;
} dp_work;

/* Centre-size encodings to corners, in double as TFLite Micro's DecodeCenterSizeBoxes. */
static AI_NO_CONTRACT void decode(const dp_params *p, const float *boxes, const float *anchors,
                                  float *dec) {
  for (int32_t i = 0; i < p->num_boxes; i++) {
    const float *b = boxes + i * p->box_stride;
    const float *a = anchors + 4 * i;
    const float yc = (float)((double)b[0] / (double)p->y_scale * (double)a[2] + (double)a[0]);
    const float xc = (float)((double)b[1] / (double)p->x_scale * (double)a[3] + (double)a[1]);
    const float hh = (float)(0.5 * exp((double)b[2] / (double)p->h_scale) * (double)a[2]);
    const float hw = (float)(0.5 * exp((double)b[3] / (double)p->w_scale) * (double)a[3]);
    dec[4 * i + 0] = yc - hh;
    dec[4 * i + 1] = xc - hw;
    dec[4 * i + 2] = yc + hh;
    dec[4 * i + 3] = xc + hw;
  }
}

static int valid_boxes(const float *dec, int32_t n) {
  for (int32_t i = 0; i < n; i++) {
    const float *b = dec + 4 * i;
    if (b[0] >= b[2] || b[1] >= b[3]) {
      return 0;
    }
  }
  return 1;
}

/* std::max / std::min's argument order, so NaN propagates as in TFLite Micro. */
static inline float fmax_std(float a, float b) { return a < b ? b : a; }
static inline float fmin_std(float a, float b) { return b < a ? b : a; }

static AI_NO_CONTRACT float iou(const float *dec, int32_t i, int32_t j) {
  const float *bi = dec + 4 * i;
  const float *bj = dec + 4 * j;
  const float area_i = (bi[2] - bi[0]) * (bi[3] - bi[1]);
  const float area_j = (bj[2] - bj[0]) * (bj[3] - bj[1]);
  if (area_i <= 0.0f || area_j <= 0.0f) {
    return 0.0f;
  }
  const float dy = fmin_std(bi[2], bj[2]) - fmax_std(bi[0], bj[0]);
  const float dx = fmin_std(bi[3], bj[3]) - fmax_std(bi[1], bj[1]);
  const float inter = fmax_std(dy, 0.0f) * fmax_std(dx, 0.0f);
  const float uni = area_i + area_j;
  return inter / (uni - inter);
}

/* Stable sort of idx[0..len) by key[idx[.]], decreasing (bottom-up merge sort, tmp: len
 * words). TFLite Micro's sorts are stable too (insertion + merge sort; partial_sort with an
 * index tie-break), so equal scores keep their order and both pick the same boxes. */
static void sort_desc(const float *key, int32_t *idx, int32_t len, int32_t *tmp) {
  for (int32_t width = 1; width < len; width *= 2) {
    for (int32_t lo = 0; lo < len; lo += 2 * width) {
      const int32_t mid = lo + width < len ? lo + width : len;
      const int32_t hi = lo + 2 * width < len ? lo + 2 * width : len;
      int32_t l = lo, r = mid;
      for (int32_t k = lo; k < hi; k++) {
        if (l >= mid || (r < hi && key[idx[r]] > key[idx[l]])) {
          tmp[k] = idx[r++];
        } else {
          tmp[k] = idx[l++];
        }
      }
    }
    memcpy(idx, tmp, (size_t)len * sizeof(int32_t));
  }
}

/* TFLite Micro's NonMaxSuppressionSingleClassHelper: boxes scoring >= the threshold, by
 * decreasing score, greedily kept unless their IoU with a kept box exceeds the threshold;
 * at most max_det. Returns how many box indices it wrote to w->selected. */
static int32_t nms_single(const dp_params *p, const dp_work *w, const float *scores, int32_t max_det) {
  int32_t kept = 0;
  for (int32_t i = 0; i < p->num_boxes; i++) {
    if (scores[i] >= p->score_threshold) {
      w->keep_s[kept] = scores[i];
      w->keep_i[kept] = i;
      w->order[kept] = kept;
      kept++;
    }
  }
  sort_desc(w->keep_s, w->order, kept, w->tmp);
  const int32_t out_size = kept < max_det ? kept : max_det;
  int32_t active = kept, sel = 0;
  memset(w->active, 1, (size_t)kept);
  for (int32_t i = 0; i < kept; i++) {
    if (active == 0 || sel >= out_size) {
      break;
    }
    if (!w->active[i]) {
      continue;
    }
    const int32_t bi = w->keep_i[w->order[i]];
    w->selected[sel++] = bi;
    w->active[i] = 0;
    active--;
    for (int32_t j = i + 1; j < kept; j++) {
      if (w->active[j] && iou(w->decoded, bi, w->keep_i[w->order[j]]) > p->iou_threshold) {
        w->active[j] = 0;
        active--;
      }
    }
  }
  return sel;
}

static void put(const dp_work *w, float *ob, float *oc, float *os, int32_t r, int32_t box, int32_t cls,
                float score) {
  memcpy(ob + 4 * r, w->decoded + 4 * box, 4 * sizeof(float));
  oc[r] = (float)cls;
  os[r] = score;
}

/* Regular NMS: per class, then the best max_detections over all classes so far. */
static int32_t nms_regular(const dp_params *p, const dp_work *w, const float *scores, float *ob, float *oc,
                           float *os) {
  const int32_t ncb = p->num_classes + p->label_offset;
  int32_t size = 0;
  for (int32_t col = 0; col < p->num_classes; col++) {
    for (int32_t row = 0; row < p->num_boxes; row++) {
      w->cls[row] = scores[row * ncb + col + p->label_offset];
    }
    const int32_t sel = nms_single(p, w, w->cls, p->per_class);
    int32_t out = size;
    for (int32_t i = 0; i < sel; i++, out++) {
      w->m_idx[out] = w->selected[i] * ncb + col + p->label_offset;
      w->m_sc[out] = w->cls[w->selected[i]];
    }
    for (int32_t i = 0; i < out; i++) {
      w->m_ord[i] = i;
    }
    sort_desc(w->m_sc, w->m_ord, out, w->tmp);
    const int32_t keep = out < p->max_detections ? out : p->max_detections;
    for (int32_t r = 0; r < keep; r++) {
      w->tmp[r] = w->m_idx[w->m_ord[r]];
      w->m_sc2[r] = w->m_sc[w->m_ord[r]];
    }
    memcpy(w->m_idx, w->tmp, (size_t)keep * sizeof(int32_t));
    memcpy(w->m_sc, w->m_sc2, (size_t)keep * sizeof(float));
    size = keep;
  }
  for (int32_t r = 0; r < size; r++) {
    const int32_t anchor = w->m_idx[r] / ncb;
    put(w, ob, oc, os, r, anchor, w->m_idx[r] - anchor * ncb - p->label_offset, w->m_sc[r]);
  }
  return size;
}

/* Fast NMS (one class per detection): NMS over each box's best class score. */
static int32_t nms_fast(const dp_params *p, const dp_work *w, const float *scores, float *ob, float *oc,
                        float *os) {
  const int32_t ncb = p->num_classes + p->label_offset;
  for (int32_t row = 0; row < p->num_boxes; row++) {
    const float *s = scores + row * ncb + p->label_offset;
    float best = s[0];
    for (int32_t c = 1; c < p->num_classes; c++) {
      best = s[c] > best ? s[c] : best;
    }
    w->cls[row] = best;
  }
  const int32_t sel = nms_single(p, w, w->cls, p->max_detections);
  for (int32_t i = 0; i < sel; i++) {
    const int32_t box = w->selected[i];
    const float *s = scores + box * ncb + p->label_offset;
    int32_t arg = 0; /* the first best class, as the index tie-break of TFLite Micro's sort */
    for (int32_t c = 1; c < p->num_classes; c++) {
      arg = s[c] > s[arg] ? c : arg;
    }
    put(w, ob, oc, os, i, box, arg, s[arg]);
  }
  return sel;
}

void ai_detection_postprocess_f32(const ai_detection_postprocess_f32_params *p, const float *boxes,
                                  const float *scores, const float *anchors, float *out_boxes,
                                  float *out_classes, float *out_scores, float *out_num, void *scratch) {
  const int32_t n = p->num_boxes;
  const int32_t s = n < p->per_class ? n : p->per_class;
  const int32_t m = p->regular ? p->max_detections + s : 0;
  float *f = (float *)scratch;
  dp_work w;
  w.decoded = f;
  w.cls = f + 4 * n;
  w.keep_s = f + 5 * n;
  w.keep_i = (int32_t *)(f + 6 * n);
  w.order = (int32_t *)(f + 7 * n);
  w.tmp = (int32_t *)(f + 8 * n);
  const int32_t after_tmp = 8 * n + (n > m ? n : m);
  w.selected = (int32_t *)(f + after_tmp);
  w.m_idx = (int32_t *)(f + after_tmp + s);
  w.m_sc = f + after_tmp + s + m;
  w.m_ord = (int32_t *)(f + after_tmp + s + 2 * m);
  w.m_sc2 = f + after_tmp + s + 3 * m;
  w.active = (uint8_t *)(f + after_tmp + s + 4 * m);

  memset(out_boxes, 0, (size_t)p->box_elems * sizeof(float));
  memset(out_classes, 0, (size_t)p->class_elems * sizeof(float));
  memset(out_scores, 0, (size_t)p->score_elems * sizeof(float));
  decode(p, boxes, anchors, w.decoded);
  int32_t found = 0;
  if (valid_boxes(w.decoded, n)) { /* else TFLite Micro fails the inference: no detections */
    found = p->regular ? nms_regular(p, &w, scores, out_boxes, out_classes, out_scores)
                       : nms_fast(p, &w, scores, out_boxes, out_classes, out_scores);
  }
  out_num[0] = (float)found;
}
