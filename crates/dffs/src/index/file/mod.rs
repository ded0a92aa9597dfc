//! Files: the inode node ([`inode`]), the content map a file has in RAM ([`content`]) and the
//! index tree that maps a large file's blocks ([`tree`]).

pub(crate) mod content;
pub(crate) mod inode;
pub(crate) mod tree;

pub(crate) use content::Content;
pub(crate) use inode::{blocks_for, inline_limit, FileNode, LINKS_MAX};
pub(crate) use tree::{IndexCache, IndexTree};
