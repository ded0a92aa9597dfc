//! The three on-flash indexes the design rests on: directories (entries embedded in the
//! directory's page, growing by linear hashing), the inode map (the paper's DirInode map,
//! extended with back references for files), and each file's block index; plus the one LRU
//! every page cache is built on.
//!
//! Each structure reads and writes through the store and keeps its pages in a bounded cache,
//! dirty pages pinned until a checkpoint writes them. Nothing here decides when to write or
//! collect: the file system does.

pub(crate) mod dir;
pub(crate) mod file;
pub(crate) mod inode_map;
pub(crate) mod lru;
