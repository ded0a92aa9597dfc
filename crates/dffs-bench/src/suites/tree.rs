//! The synthetic root file system tree (being written).
