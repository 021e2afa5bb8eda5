//! flash-model: the emulated flash device behind flashbed-emu.
//!
//! Layers, bottom up: [`nand`] (the array and its failure modes),
//! [`timing`] (when planes/buses are busy), [`store`] (where page bytes
//! live), [`media`] (the three combined, with a log for power cuts),
//! [`ftl`] (page-mapped and hybrid log-block personalities), [`cache`],
//! [`device`] (host requests), [`state`] (persistence across restarts),
//! [`crashlog`] (write log and crash states).

pub mod cache;
pub mod config;
pub mod crashlog;
pub mod device;
pub mod ftl;
pub mod hist;
pub mod media;
pub mod nand;
pub mod persist;
pub mod rng;
pub mod sbt;
pub mod state;
pub mod store;
pub mod theory;
pub mod timing;

pub use config::{load_block_preset, load_preset, parse_preset, parse_size, DeviceConfig, Preset, Set};
pub use device::{Device, IoError};
