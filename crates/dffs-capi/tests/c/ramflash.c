/* ramflash.c - the RAM flash device of ramflash.h (see there for what it owns). */
#include "ramflash.h"

#include <stdlib.h>
#include <string.h>

static ramflash *rf_of(const dffs_config *cfg) { return (ramflash *)cfg->context; }

static uint8_t *page_ptr(ramflash *rf, uint32_t page) {
    return rf->mem + (size_t)page * rf->stride;
}

static uint32_t total_pages(const ramflash *rf) {
    return rf->cfg.geometry.pages_per_block * rf->cfg.geometry.block_count;
}

static int is_marked_bad(ramflash *rf, uint32_t block) {
    const dffs_geometry *g = &rf->cfg.geometry;
    return page_ptr(rf, block * g->pages_per_block)[g->page_size] != 0xFF;
}

static int rf_read(const dffs_config *cfg, uint32_t page, uint32_t off, void *data, uint32_t len,
                   void *oob, uint32_t oob_len) {
    ramflash *rf = rf_of(cfg);
    const dffs_geometry *g = &cfg->geometry;
    rf->reads++;
    if (page >= total_pages(rf)) return DFFS_FLASH_ERR_RANGE;
    if (g->kind == DFFS_FLASH_NOR) {
        uint64_t start = (uint64_t)page * g->page_size + off;
        uint64_t cap = (uint64_t)total_pages(rf) * g->page_size;
        if (oob_len != 0 || start + len > cap) return DFFS_FLASH_ERR_RANGE;
        /* NOR pages are contiguous (stride == page_size). */
        if (len) memcpy(data, rf->mem + start, len);
        return DFFS_FLASH_OK;
    }
    if ((uint64_t)off + len > g->page_size || oob_len > g->oob_free_len)
        return DFFS_FLASH_ERR_RANGE;
    if (len) memcpy(data, page_ptr(rf, page) + off, len);
    if (oob_len) memcpy(oob, page_ptr(rf, page) + g->page_size + g->oob_free_offset, oob_len);
    if (rf->ecc_every && rf->reads % rf->ecc_every == 0) return 1; /* one bit corrected */
    return DFFS_FLASH_OK;
}

static int all_erased(const uint8_t *p, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (p[i] != 0xFF) return 0;
    return 1;
}

static int rf_prog(const dffs_config *cfg, uint32_t page, uint32_t off, const void *data,
                   uint32_t len, const void *oob, uint32_t oob_len) {
    ramflash *rf = rf_of(cfg);
    const dffs_geometry *g = &cfg->geometry;
    rf->progs++;
    if (page >= total_pages(rf) || (uint64_t)off + len > g->page_size) {
        return g->kind == DFFS_FLASH_NOR && page < total_pages(rf) ? DFFS_FLASH_ERR_CROSSES_PAGE
                                                                    : DFFS_FLASH_ERR_RANGE;
    }
    if (off % g->program_unit || len % g->program_unit) return DFFS_FLASH_ERR_ALIGN;
    uint8_t *p = page_ptr(rf, page);
    const uint8_t *d = data;
    if (g->kind == DFFS_FLASH_NOR) {
        if (oob_len) return DFFS_FLASH_ERR_RANGE;
        for (uint32_t i = 0; i < len; i++)
            if ((p[off + i] & d[i]) != d[i]) return DFFS_FLASH_ERR_NOT_ERASED;
        for (uint32_t i = 0; i < len; i++) p[off + i] &= d[i];
        return DFFS_FLASH_OK;
    }
    if (oob_len > g->oob_free_len) return DFFS_FLASH_ERR_RANGE;
    if (is_marked_bad(rf, page / g->pages_per_block)) return DFFS_FLASH_ERR_BAD_BLOCK;
    if (rf->nops[page] >= g->nop) return DFFS_FLASH_ERR_NOP;
    uint8_t *o = p + g->page_size + g->oob_free_offset;
    if (!all_erased(p + off, len) || !all_erased(o, oob_len)) return DFFS_FLASH_ERR_NOT_ERASED;
    rf->nops[page]++;
    if (len) memcpy(p + off, data, len);
    if (oob_len) memcpy(o, oob, oob_len);
    return DFFS_FLASH_OK;
}

static int rf_erase(const dffs_config *cfg, uint32_t block) {
    ramflash *rf = rf_of(cfg);
    const dffs_geometry *g = &cfg->geometry;
    rf->erases++;
    if (block >= g->block_count) return DFFS_FLASH_ERR_RANGE;
    if (rf->fail_erase_in && --rf->fail_erase_in == 0) {
        rf->failed_block = block;
        return DFFS_FLASH_ERR_ERASE;
    }
    if (block == rf->failed_block) return DFFS_FLASH_ERR_ERASE;
    uint32_t first = block * g->pages_per_block;
    int bad = g->kind == DFFS_FLASH_NAND && is_marked_bad(rf, block);
    memset(page_ptr(rf, first), 0xFF, (size_t)g->pages_per_block * rf->stride);
    memset(rf->nops + first, 0, g->pages_per_block);
    if (bad) page_ptr(rf, first)[g->page_size] = 0x00; /* the mark survives */
    return DFFS_FLASH_OK;
}

static int rf_is_bad(const dffs_config *cfg, uint32_t block) {
    ramflash *rf = rf_of(cfg);
    if (block >= cfg->geometry.block_count) return DFFS_FLASH_ERR_RANGE;
    return is_marked_bad(rf, block);
}

static int rf_mark_bad(const dffs_config *cfg, uint32_t block) {
    ramflash *rf = rf_of(cfg);
    if (block >= cfg->geometry.block_count) return DFFS_FLASH_ERR_RANGE;
    rf->marked_bad++;
    page_ptr(rf, block * cfg->geometry.pages_per_block)[cfg->geometry.page_size] = 0x00;
    return DFFS_FLASH_OK;
}

static int64_t rf_now(const dffs_config *cfg) {
    (void)cfg;
    return 1700000000; /* a fixed time, so tests are deterministic */
}

static int alloc_mem(ramflash *rf) {
    size_t pages = total_pages(rf);
    rf->mem = malloc(pages * rf->stride);
    rf->nops = calloc(pages, 1);
    if (!rf->mem || !rf->nops) return -1;
    memset(rf->mem, 0xFF, pages * rf->stride);
    rf->failed_block = UINT32_MAX;
    return 0;
}

int ramflash_init_nor(ramflash *rf, uint32_t page, uint32_t sector, uint32_t blocks) {
    memset(rf, 0, sizeof *rf);
    rf->cfg.context = rf;
    rf->cfg.read = rf_read;
    rf->cfg.prog = rf_prog;
    rf->cfg.erase = rf_erase;
    rf->cfg.now = rf_now;
    /* NOR: no is_bad / mark_bad (NULL is allowed). */
    dffs_geometry *g = &rf->cfg.geometry;
    g->kind = DFFS_FLASH_NOR;
    g->page_size = page;
    g->pages_per_block = sector / page;
    g->block_count = blocks;
    g->program_unit = 1;
    g->ecc_step = page;
    rf->stride = page;
    return alloc_mem(rf);
}

int ramflash_init_nand(ramflash *rf, uint32_t page, uint32_t oob, uint32_t ppb, uint32_t blocks) {
    memset(rf, 0, sizeof *rf);
    rf->cfg.context = rf;
    rf->cfg.read = rf_read;
    rf->cfg.prog = rf_prog;
    rf->cfg.erase = rf_erase;
    rf->cfg.is_bad = rf_is_bad;
    rf->cfg.mark_bad = rf_mark_bad;
    rf->cfg.now = rf_now;
    dffs_geometry *g = &rf->cfg.geometry;
    g->kind = DFFS_FLASH_NAND;
    g->page_size = page;
    g->oob_size = oob;
    g->oob_free_offset = 2;
    g->oob_free_len = oob / 2;
    g->pages_per_block = ppb;
    g->block_count = blocks;
    g->nop = 4;
    g->program_unit = page / 4;
    g->ecc_strength = 1;
    g->ecc_step = 512;
    rf->stride = page + oob;
    return alloc_mem(rf);
}

void ramflash_factory_bad(ramflash *rf, uint32_t block) {
    page_ptr(rf, block * rf->cfg.geometry.pages_per_block)[rf->cfg.geometry.page_size] = 0x00;
}

void ramflash_wipe(ramflash *rf) {
    for (uint32_t b = 0; b < rf->cfg.geometry.block_count; b++) {
        int bad = rf->cfg.geometry.kind == DFFS_FLASH_NAND && is_marked_bad(rf, b);
        uint32_t first = b * rf->cfg.geometry.pages_per_block;
        memset(page_ptr(rf, first), 0xFF, (size_t)rf->cfg.geometry.pages_per_block * rf->stride);
        memset(rf->nops + first, 0, rf->cfg.geometry.pages_per_block);
        if (bad) ramflash_factory_bad(rf, b);
    }
}

void ramflash_free(ramflash *rf) {
    free(rf->mem);
    free(rf->nops);
    rf->mem = NULL;
    rf->nops = NULL;
}
