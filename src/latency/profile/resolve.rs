//! Resolving an architecture's layer sequence into the priced rows of a step, against the
//! tables of a bundle.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::arch::{self, Architecture, Category, Section};
use super::lookup::{MoeTable, Table1d};
use super::{ProfileError, ProfileSpec, load};
use crate::latency::ExpertRouter;

/// One priced row of a step, repeated `repeats` times.
#[derive(Debug)]
pub(super) struct Row {
    pub name: &'static str,
    pub repeats: u64,
    pub price: Price,
    /// Where the row sits: prologue, block or head (pipeline stages cut between blocks).
    pub part: Part,
}

/// The part of a step a row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Prologue,
    Block,
    Head,
}

impl Part {
    fn of(section: Section) -> Part {
        match section {
            Section::Prologue => Part::Prologue,
            Section::Head => Part::Head,
            _ => Part::Block,
        }
    }
}

/// How a row is priced.
#[derive(Debug)]
pub(super) enum Price {
    /// A dense layer, keyed on the step's token count.
    Tokens(Table1d),
    /// A per-sequence layer, keyed on the step's sequence count.
    Sequences(Table1d),
    /// The attention layer (the grid is shared by all rows); omitted without prefill or decodes.
    Attention,
    /// The MoE block.
    Moe(Box<MoeBlock>),
    /// A tensor-parallel all-reduce of the step's activation.
    TpAllReduce,
    /// The expert-parallel dispatch before a MoE layer.
    EpDispatch,
    /// The expert-parallel combine after a MoE layer.
    EpCombine,
}

impl Price {
    /// Whether the row is communication rather than compute.
    pub fn is_comm(&self) -> bool {
        matches!(
            self,
            Price::TpAllReduce | Price::EpDispatch | Price::EpCombine
        )
    }
}

/// The MoE table with the gate that spreads a step's tokens over the EP ranks.
#[derive(Debug)]
pub(super) struct MoeBlock {
    pub table: MoeTable,
    pub router: ExpertRouter,
}

/// The block layers followed by a TP all-reduce of their output.
const TP_ALLREDUCE_AFTER: [&str; 2] = ["o_proj", "down_proj"];

/// Layer names as `&'static str` for `LayerTiming`: each distinct name is leaked once per
/// process, however many bundles are loaded.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.iter().find(|n| **n == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

/// Turns sequence layers into rows, reading each table file once.
pub(super) struct Resolver<'a> {
    spec: &'a ProfileSpec<'a>,
    arch: &'a Architecture,
    bundle: &'a Path,
    tp: u32,
    /// The TP degrees with a folder, ascending.
    tps: &'a [u32],
    /// Tables read so far, by file.
    files: Vec<(PathBuf, Vec<(String, Table1d)>)>,
    moe: Option<MoeTable>,
    /// Block layers already reported as missing.
    warned: Vec<String>,
}

impl<'a> Resolver<'a> {
    /// A resolver for the bundle folder `bundle`, run at `tp`, whose TP folders are `tps`.
    pub fn new(
        spec: &'a ProfileSpec<'a>,
        arch: &'a Architecture,
        bundle: &'a Path,
        tp: u32,
        tps: &'a [u32],
    ) -> Resolver<'a> {
        Resolver {
            spec,
            arch,
            bundle,
            tp,
            tps,
            files: Vec::new(),
            moe: None,
            warned: Vec::new(),
        }
    }

    /// The rows of one step, in order: prologue, the block (its rows repeated per hidden
    /// layer), head.
    pub fn rows(mut self) -> Result<Vec<Row>, ProfileError> {
        let mut rows = Vec::new();
        let arch = self.arch;
        let comm = &self.spec.collectives;
        let tp_comm = comm.tp > 1 && comm.tp_link.is_some();
        let ep_comm = comm.ep.total > 1 && comm.ep.link.is_some();
        let layers_per_step = self.spec.model.num_layers;
        let comm_row = |name: &str, price: Price| Row {
            name: intern(name),
            repeats: layers_per_step,
            price,
            part: Part::Block,
        };
        for (section, layers) in arch.step_sections(self.spec.model.moe.is_some()) {
            for layer in layers {
                let Some(row) = self.row(section, layer)? else {
                    continue;
                };
                let moe = matches!(row.price, Price::Moe(_));
                if moe && ep_comm {
                    rows.push(comm_row("ep_dispatch", Price::EpDispatch));
                }
                let after = section.per_block() && TP_ALLREDUCE_AFTER.contains(&row.name);
                rows.push(row);
                if moe && ep_comm {
                    rows.push(comm_row("ep_combine", Price::EpCombine));
                }
                if after && tp_comm {
                    rows.push(comm_row("tp_allreduce", Price::TpAllReduce));
                }
            }
        }
        Ok(rows)
    }

    /// `<bundle>/tp<N>/<file>`, where N is 1 for a `tp_stable` layer when `tp1/` exists, else
    /// the run's TP degree.
    fn file_of(&self, layer: &arch::Layer, file: &str) -> PathBuf {
        let tp = if layer.tp_stable && self.tps.contains(&1) {
            1
        } else {
            self.tp
        };
        self.bundle.join(format!("tp{tp}")).join(file)
    }

    fn row(&mut self, section: Section, layer: &arch::Layer) -> Result<Option<Row>, ProfileError> {
        let per_block = section.per_block();
        if per_block && layer.name == "rotary_emb" && self.spec.hardware.contains("TPU") {
            return Ok(None);
        }
        let price = match layer.category {
            Category::Attention => Price::Attention,
            Category::Moe => Price::Moe(Box::new(self.moe_block(layer)?)),
            category @ (Category::Dense | Category::PerSequence) => {
                let file = self.file_of(
                    layer,
                    match category {
                        Category::Dense => "dense.csv",
                        _ => "per_sequence.csv",
                    },
                );
                match self.table(&file, category, &layer.name)? {
                    Some(t) if category == Category::Dense => Price::Tokens(t),
                    Some(t) => Price::Sequences(t),
                    None if per_block => {
                        if !self.warned.contains(&layer.name) {
                            log::warn!(
                                "layer `{}` is in the sequence of {} but {} has no rows for it; \
                                 skipping it",
                                layer.name,
                                self.arch.source,
                                file.display()
                            );
                            self.warned.push(layer.name.clone());
                        }
                        return Ok(None);
                    }
                    None => {
                        return Err(ProfileError::MissingLayer {
                            path: file,
                            layer: layer.name.clone(),
                            section: if section == Section::Head {
                                "head"
                            } else {
                                "prologue"
                            },
                            architecture: self.arch.source.clone(),
                        });
                    }
                }
            }
        };
        Ok(Some(Row {
            name: intern(&layer.name),
            repeats: if per_block {
                self.spec.model.num_layers
            } else {
                1
            },
            price,
            part: Part::of(section),
        }))
    }

    /// The table of `layer` in `file`, reading the file on first use.
    fn table(
        &mut self,
        file: &Path,
        category: Category,
        layer: &str,
    ) -> Result<Option<Table1d>, ProfileError> {
        let index = match self.files.iter().position(|(p, _)| p == file) {
            Some(i) => i,
            None => {
                let tables = load::load_1d(file, category, self.arch)?;
                self.files.push((file.to_path_buf(), tables));
                self.files.len() - 1
            }
        };
        Ok(self.files[index]
            .1
            .iter()
            .find(|(name, _)| name == layer)
            .map(|(_, t)| t.clone()))
    }

    fn moe_block(&mut self, layer: &arch::Layer) -> Result<MoeBlock, ProfileError> {
        let Some(moe) = &self.spec.model.moe else {
            return Err(ProfileError::Architecture {
                file: self.arch.source.clone(),
                message: format!(
                    "layer `{}` is a moe layer, but {} has no experts",
                    layer.name, self.spec.model.name
                ),
            });
        };
        let table = match &self.moe {
            Some(table) => table.clone(),
            None => {
                // MoE is profiled at tp1 only: `tp1/`, else the lowest TP degree there is.
                let tp = if self.tps.contains(&1) {
                    1
                } else {
                    self.tps[0]
                };
                let table = load::load_moe(&self.bundle.join(format!("tp{tp}/moe.csv")))?;
                self.moe = Some(table.clone());
                table
            }
        };
        Ok(MoeBlock {
            table,
            router: ExpertRouter::new(self.spec.collectives.ep, moe.num_experts, moe.top_k),
        })
    }
}
