/**
 * @file mnist.h
 * @brief Reader of the IDX files of MNIST and Fashion-MNIST (gzip-compressed or plain).
 *
 * The IDX format (LeCun et al.) is a big-endian header - a magic number whose third byte is the
 * element type (0x08 = unsigned byte) and whose fourth byte is the number of dimensions, then one
 * 32-bit size per dimension - followed by the elements in row-major order.
 */
#ifndef COLL_TRAIN_MNIST_H
#define COLL_TRAIN_MNIST_H

#include <stddef.h>
#include <stdint.h>

/** Number of classes of (Fashion-)MNIST; every label is below it. */
#define MNIST_CLASSES 10

/** Mean and standard deviation of the Fashion-MNIST training pixels scaled to [0, 1]. */
#define MNIST_FASHION_MEAN 0.2860f
#define MNIST_FASHION_STD  0.3530f

/** One split of a data set (train or test), kept as bytes: 1/4 of the memory of floats. */
typedef struct mnist_set {
    size_t count;    /**< number of images (and labels) */
    size_t rows;     /**< image height in pixels */
    size_t cols;     /**< image width in pixels */
    uint8_t *pixels; /**< count x rows x cols grey values 0..255, row-major; owned by the set */
    uint8_t *labels; /**< count class indices, each < MNIST_CLASSES; owned by the set */
} mnist_set_t;

/**
 * @brief Load one split: `<dir>/<split>-images-idx3-ubyte.gz` and
 *        `<dir>/<split>-labels-idx1-ubyte.gz` (a file without the `.gz` suffix is used when the
 *        compressed one does not exist).
 *
 * Checks the magic numbers, that both files hold the same number of items, that the files are
 * neither truncated nor longer than their headers say, and that every label is a valid class.
 *
 * @param [in]  dir    Directory of the data set, e.g. /usr/share/datasets/fashion-mnist.
 * @param [in]  split  File name prefix: "train" or "t10k".
 * @param [out] set    Filled on success; release with mnist_free(). Untouched on failure.
 * @return 0 on success; -1 on failure, after printing to stderr which file was wrong and how.
 */
int mnist_load(const char *dir, const char *split, mnist_set_t *set);

/** @brief Free the buffers of @p set and zero it; safe on a zeroed or already freed set. */
void mnist_free(mnist_set_t *set);

/** @return The number of pixels of one image of @p set (rows x cols). */
size_t mnist_image_size(const mnist_set_t *set);

/**
 * @brief Gather images into a float batch: x[i] = (pixel / 255 - mean) / std for the image
 *        index[i] (use mean 0, std 1 for plain [0, 1] scaling).
 * @param [in]  set    Source split.
 * @param [in]  index  @p n image indices, each < set->count; NULL means first, first + 1, ...
 * @param [in]  first  First image when @p index is NULL; ignored otherwise.
 * @param [in]  n      Number of images to gather.
 * @param [in]  mean   Value subtracted after scaling to [0, 1].
 * @param [in]  std    Divisor after subtracting @p mean, > 0.
 * @param [out] x      n x mnist_image_size(set) floats, row-major.
 * @param [out] y      n labels.
 */
void mnist_gather(const mnist_set_t *set, const uint32_t *index, size_t first, size_t n,
                  float mean, float std, float *x, uint8_t *y);

#endif /* COLL_TRAIN_MNIST_H */
