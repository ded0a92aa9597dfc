//! Files: open handles, the overlay of uncommitted changes, the write-back data cache, data
//! nodes on flash, and reading, writing, truncating and committing file content.

pub(crate) mod commit;
pub(crate) mod data_cache;
pub(crate) mod data_nodes;
pub(crate) mod handles;
pub(crate) mod overlay;
pub(crate) mod read;
pub(crate) mod truncate;
pub(crate) mod write;
