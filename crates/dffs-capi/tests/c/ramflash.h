/* ramflash.h - a flash device kept in RAM, for testing the DFFS C API.
 *
 * Owns a NOR-like or NAND-like device model and its dffs_config callbacks. It enforces the
 * device rules DFFS must respect (program only erased bytes / 1->0 on NOR, NAND NOP limit and
 * program-unit alignment, page bounds) and can report corrected bit errors and fail erases, so
 * the tests see a driver that reports rather than hides. It never knows about the file system.
 */
#ifndef RAMFLASH_H
#define RAMFLASH_H

#include <stdint.h>

#include "dffs.h"

typedef struct ramflash {
    dffs_config cfg;     /* cfg.context points back at this struct */
    uint8_t *mem;        /* blocks * pages_per_block * (page_size + oob_size) */
    uint8_t *nops;       /* programs per page since its erase */
    uint32_t stride;     /* page_size + oob_size */
    /* counters */
    unsigned long reads, progs, erases, marked_bad;
    /* faults: every `ecc_every`-th read reports 1 corrected bit (0: never) */
    unsigned long ecc_every;
    /* the `fail_erase_in`-th erase from now fails and the block goes bad (0: never) */
    unsigned long fail_erase_in;
    uint32_t failed_block; /* the block that failed, UINT32_MAX if none */
} ramflash;

/* A NOR device: `page` B program pages, `sector` B erase sectors, `blocks` sectors. */
int ramflash_init_nor(ramflash *rf, uint32_t page, uint32_t sector, uint32_t blocks);

/* A NAND device: `page` + `oob` B pages, `ppb` pages per block, `blocks` blocks, NOP 4,
 * 1-bit ECC per 512 B, bad-block marker in OOB byte 0 of a block's first page. */
int ramflash_init_nand(ramflash *rf, uint32_t page, uint32_t oob, uint32_t ppb, uint32_t blocks);

/* Marks a block bad as the factory would (NAND). */
void ramflash_factory_bad(ramflash *rf, uint32_t block);

/* Erases the whole device (as a fresh chip; bad-block marks survive). */
void ramflash_wipe(ramflash *rf);

void ramflash_free(ramflash *rf);

#endif
