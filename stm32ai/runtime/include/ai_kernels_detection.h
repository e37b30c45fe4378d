/* TFLite_Detection_PostProcess (SSD box decoding + non-max suppression), TFLite Micro's
 * algorithm (kernels/detection_postprocess.cc), float32.
 *
 * Calling convention (see stm32ai/passes/lower/__init__.py):
 *   void ai_<kernel>(const ai_<kernel>_params *p, <inputs...>, <outputs...>, void *scratch);
 * inputs: box encodings [1, num_boxes, box_stride] (y, x, h, w first), class scores
 * [1, num_boxes, label_offset + num_classes], anchors [num_boxes, 4] (y, x, h, w);
 * outputs: boxes [.., 4] (ymin, xmin, ymax, xmax), classes, scores (each holds every detection:
 * checked at generate time), num_detections [1]. Entries past the detections found are zero. Details and the differences
 * from TFLite Micro where it has no defined result: docs/kernels_detection.md.
 *
 * Scratch (stm32ai/passes/lower/detection.py scratch_size; n boxes, s = min(n, per_class),
 * m = max_detections + s for regular NMS else 0), 32-bit words in this order:
 * decoded boxes 4n | class scores n | kept scores n | kept indices n | sort order n |
 * merge buffer max(n, m) | selected s | merged indices m | merged scores m | merged order m |
 * sorted scores m; then n bytes of candidate flags.
 */
#ifndef AI_KERNELS_DETECTION_H
#define AI_KERNELS_DETECTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t num_boxes, box_stride, num_classes, label_offset;
  int32_t max_detections, per_class, regular;
  int32_t box_elems, class_elems, score_elems; /* output sizes, zeroed before the detections */
  float score_threshold, iou_threshold;
  float y_scale, x_scale, h_scale, w_scale;
} ai_detection_postprocess_f32_params;

void ai_detection_postprocess_f32(const ai_detection_postprocess_f32_params *p, const float *boxes,
                                  const float *scores, const float *anchors, float *out_boxes,
                                  float *out_classes, float *out_scores, float *out_num, void *scratch);

#ifdef __cplusplus
}
#endif

#endif /* AI_KERNELS_DETECTION_H */
