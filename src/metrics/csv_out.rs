//! The per-request CSV (LLMServingSim's columns and order), written atomically.
//!
//! Rows are formatted byte for byte as Python's `csv.writer` (the writer LLMServingSim uses)
//! emits them: `\r\n` line ends, and a field is quoted only when it holds a comma, a quote or
//! a line break, so the ITL list is quoted once it has two or more entries.

mod step_texts;

use super::{Itl, PdRecord, RequestRecord, StepGaps};
use crate::Nanos;
use crate::output::{Finished, OutputFile};
use crate::scheduler::request::TokenRun;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use step_texts::StepTexts;

/// The exact CSV header of LLMServingSim 2.0.
pub const CSV_HEADER: [&str; 12] = [
    "instance id",
    "request id",
    "model",
    "input",
    "output",
    "arrival",
    "end_time",
    "latency",
    "queuing_delay",
    "TTFT",
    "TPOT",
    "ITL",
];

/// The columns appended after [`CSV_HEADER`] when prefill/decode disaggregation is on: the
/// instance that ran the prompt (the row's own instance when one instance served the request
/// start to finish) and the time from the end of the prefill to the arrival of the KV cache at
/// the decode instance, ns (0 without a transfer).
pub const PD_CSV_COLUMNS: [&str; 2] = ["prefill instance", "kv_transfer_ns"];

/// The columns appended (after the [`PD_CSV_COLUMNS`] when those are on) when the workload has
/// sessions: the session of the request and its step (LLMServingSim's sub-request index, or
/// the workflow step label); empty for a request outside any session.
pub const SESSION_COLUMNS: [&str; 2] = ["session_id", "sub_request_index"];

/// The column appended last when the run has an SGLang instance: the engine of the row's
/// instance (`vllm` or `sglang`; the decode instance's under P/D).
pub const ENGINE_COLUMN: &str = "engine";

/// Which column sets a [`RequestCsv`] carries after LLMServingSim's 12 [`CSV_HEADER`]
/// columns, which always come first. The default is none: exactly LLMServingSim's file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsvColumns {
    /// The [`PD_CSV_COLUMNS`], next: the run has prefill/decode disaggregation.
    pub pd: bool,
    /// The [`SESSION_COLUMNS`], next: the workload has sessions.
    pub sessions: bool,
    /// The [`ENGINE_COLUMN`], last, from each instance's engine name (by instance id):
    /// given when the run has an SGLang instance, so that a vLLM-only run's file stays
    /// LLMServingSim's.
    pub engines: Option<Box<[&'static str]>>,
}

impl CsvColumns {
    /// The header, in column order.
    pub fn header(&self) -> impl Iterator<Item = &'static str> {
        let pd: &[&str] = if self.pd { &PD_CSV_COLUMNS } else { &[] };
        let sessions: &[&str] = if self.sessions { &SESSION_COLUMNS } else { &[] };
        CSV_HEADER
            .into_iter()
            .chain(pd.iter().copied())
            .chain(sessions.iter().copied())
            .chain(self.engines.as_ref().map(|_| ENGINE_COLUMN))
    }
}

/// Python's `csv.writer` default line terminator.
pub const LINE_END: &[u8] = b"\r\n";

/// Formatted rows are handed to the file in chunks of at least this many bytes, which the
/// buffered writer passes straight through: each byte is copied once.
pub const CHUNK: usize = 1 << 16;

/// A batch of rows goes to the writer thread once its rows hold this many inter-token
/// latencies and step finish times (or [`BATCH_ROWS`] rows), so that a hand-over costs little
/// next to the formatting. The writer, faster than the simulation, waits for each batch, and
/// each hand-over wakes it (a futex wake and a switch on both sides): at a sixteenth of this
/// (about 60 rows of 256 tokens a batch), the wakes took about 6 % of the CPU time of 100K
/// requests on 16 instances.
const BATCH_ITLS: usize = 1 << 17;

/// See [`BATCH_ITLS`].
const BATCH_ROWS: usize = 1024;

/// Full batches the simulation may run ahead of the writer thread before it waits: enough to
/// cover the writer's pauses in [`OutputFile::write`]'s periodic syncs (about 4,000 rows of
/// 256 tokens, as 64 batches of a quarter of the size covered).
const BATCHES_IN_FLIGHT: usize = 8;

/// Streams request rows into a temporary file beside the destination; [`RequestCsv::commit`]
/// renames it into place, so an aborted run leaves no partial CSV.
///
/// Formatting and writing happen on a writer thread, beside the simulation: the caller copies
/// each record into a reused batch, which goes to the writer when full and comes back empty.
/// Rows reach the file in the order they were written; steady-state writing allocates nothing.
/// A record's inter-token latencies as runs of its instance's steps are copied as the runs,
/// with the finish times of the instance's steps not sent yet (see `csv_out/step_texts.rs`):
/// the copy costs per run and per step, not per token.
pub struct RequestCsv {
    dest: PathBuf,
    /// Rows not yet handed to the writer thread.
    batch: RowBatch,
    /// Full batches, then the order to commit, for the writer thread; `None` once committed.
    to_writer: Option<SyncSender<WriterMessage>>,
    /// Batches the writer thread has emptied, for reuse.
    emptied: Receiver<RowBatch>,
    /// The writer thread; it returns the finished file, or the first error it met.
    writer: Option<JoinHandle<anyhow::Result<Option<Finished>>>>,
    /// Whether the CSV has the [`SESSION_COLUMNS`].
    sessions: bool,
    /// By instance id: how many of its steps' finish times went to the writer.
    steps_sent: Vec<u64>,
}

/// What the writer thread is sent.
enum WriterMessage {
    /// Rows to format and write, in order.
    Rows(RowBatch),
    /// Every row has been sent: flush and sync the file, and hand it back to be put in place.
    /// A writer whose channel closes without this deletes the temporary file.
    Finish,
}

impl RequestCsv {
    /// Creates the temporary file in `path`'s directory, starts the writer thread and has it
    /// write the header: LLMServingSim's 12 columns, then the extra sets `columns` turns on.
    pub fn create(path: &Path, columns: CsvColumns) -> anyhow::Result<RequestCsv> {
        let file = OutputFile::create(path)?;
        let (to_writer, from_caller) = mpsc::sync_channel(BATCHES_IN_FLIGHT);
        let (to_caller, emptied) = mpsc::channel();
        let sessions = columns.sessions;
        let writer = std::thread::Builder::new()
            .name("csv-writer".to_owned())
            .spawn(move || write_rows(file, columns, &from_caller, &to_caller))
            .context("starting the CSV writer thread")?;
        Ok(RequestCsv {
            dest: path.to_path_buf(),
            batch: RowBatch::default(),
            to_writer: Some(to_writer),
            emptied,
            writer: Some(writer),
            sessions,
            steps_sent: Vec::new(),
        })
    }

    /// Appends the row of `record`. `session` is the request's session id and step label,
    /// `None` for a request outside any session; it is written only when the CSV has the
    /// [`SESSION_COLUMNS`].
    pub fn write(
        &mut self,
        record: &RequestRecord<'_>,
        session: Option<(&str, &str)>,
    ) -> anyhow::Result<()> {
        let session = session.filter(|_| self.sessions);
        self.batch.push(record, session, &mut self.steps_sent);
        if self.batch.itls >= BATCH_ITLS || self.batch.len >= BATCH_ROWS {
            let next = self.emptied.try_recv().unwrap_or_default();
            let full = std::mem::replace(&mut self.batch, next);
            self.send(WriterMessage::Rows(full))?;
        }
        Ok(())
    }

    /// Hands the last rows to the writer thread and waits for it to flush, sync and
    /// atomically rename the file to its destination.
    pub fn commit(self) -> anyhow::Result<()> {
        self.finish()?.commit()
    }

    /// Hands the last rows to the writer thread and waits for it to flush and sync the file,
    /// which [`Finished::commit`] then puts in place.
    pub fn finish(mut self) -> anyhow::Result<Finished> {
        let last = std::mem::take(&mut self.batch);
        self.send(WriterMessage::Rows(last))?;
        self.send(WriterMessage::Finish)?;
        self.to_writer = None;
        match self.join_writer()? {
            Some(finished) => Ok(finished),
            None => anyhow::bail!(
                "writing {}: the CSV writer stopped early",
                self.dest.display()
            ),
        }
    }

    /// Sends `message` to the writer thread; when the thread has stopped on an error, returns
    /// that error.
    fn send(&mut self, message: WriterMessage) -> anyhow::Result<()> {
        let sent = self
            .to_writer
            .as_ref()
            .is_some_and(|to_writer| to_writer.send(message).is_ok());
        if sent {
            return Ok(());
        }
        self.to_writer = None;
        self.join_writer()?;
        anyhow::bail!(
            "writing {}: the CSV writer stopped early",
            self.dest.display()
        )
    }

    /// Waits for the writer thread to end and returns its result.
    fn join_writer(&mut self) -> anyhow::Result<Option<Finished>> {
        match self.writer.take().map(JoinHandle::join) {
            None => Ok(None),
            Some(Ok(result)) => result,
            Some(Err(_)) => anyhow::bail!(
                "writing {}: the CSV writer thread panicked",
                self.dest.display()
            ),
        }
    }
}

impl Drop for RequestCsv {
    /// Uncommitted (the run failed): the writer thread sees its channel close without a
    /// commit and deletes the temporary file; waiting for it leaves the directory clean.
    fn drop(&mut self) {
        self.to_writer = None;
        let _ = self.join_writer();
    }
}

/// The writer thread: writes the header, then formats and writes each batch's rows and sends
/// the batch back for reuse, until told to finish; returns the finished file (`None` when the
/// caller went away first), or the first error. Its file, dropped unfinished, deletes itself.
fn write_rows(
    mut file: OutputFile,
    columns: CsvColumns,
    batches: &Receiver<WriterMessage>,
    emptied: &Sender<RowBatch>,
) -> anyhow::Result<Option<Finished>> {
    let mut out = Vec::with_capacity(2 * CHUNK);
    // By instance id: the steps its rows' gaps are runs of.
    let mut steps: Vec<StepTexts> = Vec::new();
    for (i, name) in columns.header().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_text_field(&mut out, name);
    }
    out.extend_from_slice(LINE_END);
    while let Ok(message) = batches.recv() {
        let mut batch = match message {
            WriterMessage::Rows(batch) => batch,
            WriterMessage::Finish => {
                file.write(&out)?;
                return file.finish().map(Some);
            }
        };
        let rows = &batch.rows[..batch.len];
        // As the simulation's loop does: below that, the texts stay in the caches.
        let warm = steps.len() > crate::scheduler::WARM_ABOVE;
        for (r, row) in rows.iter().enumerate() {
            if warm {
                warm_ahead(rows, r, &batch, &steps);
            }
            push_fields(&mut out, &row.record());
            push_row_itl(&mut out, row, &batch, &mut steps)?;
            if columns.pd {
                push_pd_columns(&mut out, &row.record());
            }
            if columns.sessions {
                push_session_columns(&mut out, row.session());
            }
            if let Some(engines) = &columns.engines {
                out.push(b',');
                let engine = engines.get(row.instance_id as usize).copied().unwrap_or("");
                push_text_field(&mut out, engine);
            }
            out.extend_from_slice(LINE_END);
            if out.len() >= CHUNK {
                file.write(&out)?;
                out.clear();
            }
        }
        batch.clear();
        // The caller may be gone already (it is committing); the batch is then just freed.
        let _ = emptied.send(batch);
    }
    Ok(None)
}

/// Rows on their way to the writer thread. Emptying keeps every buffer, so a reused batch
/// copies records without allocating.
#[derive(Default)]
struct RowBatch {
    /// The first `len` rows are filled; the rest are spare.
    rows: Vec<OwnedRecord>,
    len: usize,
    /// The filled rows' earlier token runs ([`RowItl::Steps`]).
    runs: Vec<TokenRun>,
    /// The filled rows' listed gaps ([`RowItl::Listed`]) and the step finish times sent with
    /// them ([`RowItl::Steps`]).
    values: Vec<Nanos>,
    /// Inter-token latencies in the filled rows, and step finish times sent with them.
    itls: usize,
}

impl RowBatch {
    /// Appends the row of `record`; `steps_sent` counts by instance the steps whose finish
    /// times went to the writer, the rows here included.
    fn push(
        &mut self,
        record: &RequestRecord<'_>,
        session: Option<(&str, &str)>,
        steps_sent: &mut Vec<u64>,
    ) {
        if self.len == self.rows.len() {
            self.rows.push(OwnedRecord::default());
        }
        let at = self.values.len();
        let itl = match record.itl_ns {
            Itl::Listed(gaps) => {
                self.values.extend_from_slice(gaps);
                RowItl::Listed(at, self.values.len())
            }
            Itl::Steps(gaps) => RowItl::Steps(self.push_steps(&gaps, record, steps_sent)),
        };
        self.itls += record.itl_ns.len() + (self.values.len() - at);
        self.rows[self.len].copy_from(record, itl, session);
        self.len += 1;
        // The next row, reused, is written at the next request's finish: its lines were
        // last touched a batch ago (cold by then), and this is a hint that brings them in.
        if let Some(next) = self.rows.get(self.len) {
            crate::scheduler::warm_value(next);
        }
    }

    /// Copies the runs of `gaps`, and the finish times of the steps of the record's instance
    /// not sent to the writer yet, into the batch.
    fn push_steps(
        &mut self,
        gaps: &StepGaps<'_>,
        record: &RequestRecord<'_>,
        steps_sent: &mut Vec<u64>,
    ) -> RowSteps {
        let runs = self.runs.len();
        self.runs.extend_from_slice(gaps.earlier);
        let i = record.instance_id as usize;
        if steps_sent.len() <= i {
            steps_sent.resize(i + 1, 0);
        }
        let window = gaps.steps;
        let sent_from = steps_sent[i].max(window.first);
        let values = self.values.len();
        if sent_from < window.end() && gaps.runs().next().is_some() {
            let k = (sent_from - window.first) as usize;
            self.values.extend_from_slice(&window.times[k..]);
            steps_sent[i] = window.end();
        }
        RowSteps {
            from: gaps.from,
            earlier: (runs, self.runs.len()),
            last: gaps.last,
            held_from: window.first,
            sent_from,
            sent: (values, self.values.len()),
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        self.runs.clear();
        self.values.clear();
        self.itls = 0;
    }
}

/// Where a row's inter-token latencies are in its batch.
#[derive(Debug, Clone, Copy)]
enum RowItl {
    /// Listed: `values[.0...1]`.
    Listed(usize, usize),
    /// Runs of its instance's steps.
    Steps(RowSteps),
}

impl Default for RowItl {
    fn default() -> Self {
        RowItl::Listed(0, 0)
    }
}

/// A row's token runs, and the finish times of its instance's steps sent with it.
#[derive(Debug, Clone, Copy)]
struct RowSteps {
    /// The time of a token before the runs (see [`StepGaps::from`]).
    from: Option<Nanos>,
    /// Its earlier runs: `runs[earlier.0..earlier.1]`.
    earlier: (usize, usize),
    last: TokenRun,
    /// The first step of its record's window when the row was written: no later row of the
    /// instance names an older one.
    held_from: u64,
    /// The finish times of the steps from the `sent_from`-th on: `values[sent.0..sent.1]`.
    sent_from: u64,
    sent: (usize, usize),
}

/// A [`RequestRecord`] and its session labels, copied into buffers of its own.
#[derive(Default)]
struct OwnedRecord {
    instance_id: u32,
    request_id: u64,
    model: String,
    input_toks: u32,
    output_toks: u32,
    arrival_ns: u64,
    first_token_ns: u64,
    end_ns: u64,
    queuing_delay_ns: u64,
    itl: RowItl,
    pd: Option<PdRecord>,
    /// Whether the request belongs to a session, whose id and step label follow.
    in_session: bool,
    session_id: String,
    session_step: String,
}

impl OwnedRecord {
    fn copy_from(&mut self, r: &RequestRecord<'_>, itl: RowItl, session: Option<(&str, &str)>) {
        self.instance_id = r.instance_id;
        self.request_id = r.request_id;
        self.model.clear();
        self.model.push_str(r.model);
        self.input_toks = r.input_toks;
        self.output_toks = r.output_toks;
        self.arrival_ns = r.arrival_ns;
        self.first_token_ns = r.first_token_ns;
        self.end_ns = r.end_ns;
        self.queuing_delay_ns = r.queuing_delay_ns;
        self.itl = itl;
        self.pd = r.pd;
        self.in_session = session.is_some();
        self.session_id.clear();
        self.session_step.clear();
        if let Some((id, step)) = session {
            self.session_id.push_str(id);
            self.session_step.push_str(step);
        }
    }

    /// Its record, without the inter-token latencies (in the batch: [`push_row_itl`]).
    fn record(&self) -> RequestRecord<'_> {
        RequestRecord {
            instance_id: self.instance_id,
            request_id: self.request_id,
            model: &self.model,
            input_toks: self.input_toks,
            output_toks: self.output_toks,
            arrival_ns: self.arrival_ns,
            first_token_ns: self.first_token_ns,
            end_ns: self.end_ns,
            queuing_delay_ns: self.queuing_delay_ns,
            itl_ns: Itl::default(),
            pd: self.pd,
        }
    }

    fn session(&self) -> Option<(&str, &str)> {
        self.in_session
            .then_some((self.session_id.as_str(), self.session_step.as_str()))
    }
}

/// Appends the fields of `r`'s CSV row, without the line end.
pub fn format_row(row: &mut Vec<u8>, r: &RequestRecord<'_>) {
    push_fields(row, r);
    push_itl_field(row, r.itl_ns);
}

/// Rows ahead of the one written whose step entries are warmed, and whose text is.
const ENTRIES_AHEAD: usize = 4;
const TEXT_AHEAD: usize = 2;

/// Warms what the rows a few places after the `r`-th read of their instances' step texts
/// (hints: the texts are written as before). With hundreds of instances, consecutive rows
/// read the texts of different instances, cold since each one's last row: at 100K requests
/// on 256 instances the writer thread took about a quarter less CPU time with it.
fn warm_ahead(rows: &[OwnedRecord], r: usize, batch: &RowBatch, steps: &[StepTexts]) {
    let first_step = |k: usize| {
        let row = rows.get(k)?;
        let RowItl::Steps(s) = row.itl else {
            return None;
        };
        let first = batch.runs[s.earlier.0..s.earlier.1]
            .first()
            .unwrap_or(&s.last);
        Some((steps.get(row.instance_id as usize)?, first.start))
    };
    if let Some((texts, start)) = first_step(r + ENTRIES_AHEAD) {
        texts.warm_entries(start);
    }
    if let Some((texts, start)) = first_step(r + TEXT_AHEAD) {
        texts.warm_text(start);
    }
}

/// Appends the inter-token latencies of `row`, in `batch`: listed, or runs of its instance's
/// steps, whose finish times (those sent with it added) are in `steps`.
fn push_row_itl(
    out: &mut Vec<u8>,
    row: &OwnedRecord,
    batch: &RowBatch,
    steps: &mut Vec<StepTexts>,
) -> anyhow::Result<()> {
    let s = match row.itl {
        RowItl::Listed(a, b) => {
            push_itl_field(out, Itl::Listed(&batch.values[a..b]));
            return Ok(());
        }
        RowItl::Steps(s) => s,
    };
    let i = row.instance_id as usize;
    if steps.len() <= i {
        steps.resize_with(i + 1, StepTexts::default);
    }
    let texts = &mut steps[i];
    if s.sent.1 > s.sent.0 {
        texts.append(s.sent_from, &batch.values[s.sent.0..s.sent.1])?;
    }
    texts.forget_before(s.held_from);
    let gaps = StepGaps {
        from: s.from,
        earlier: &batch.runs[s.earlier.0..s.earlier.1],
        last: s.last,
        steps: texts.window(),
    };
    step_texts::push_step_itl(out, &gaps, texts)
        .with_context(|| format!("writing the ITL list of request {}", row.request_id))
}

/// Appends the fields of `r`'s CSV row before its inter-token latencies, each followed by
/// its comma.
fn push_fields(row: &mut Vec<u8>, r: &RequestRecord<'_>) {
    let mut num = itoa::Buffer::new();
    let mut int_field = |row: &mut Vec<u8>, value: u64| {
        row.extend_from_slice(num.format(value).as_bytes());
        row.push(b',');
    };
    int_field(row, r.instance_id.into());
    int_field(row, r.request_id);
    push_text_field(row, r.model);
    row.push(b',');
    int_field(row, r.input_toks.into());
    int_field(row, r.output_toks.into());
    int_field(row, r.arrival_ns);
    int_field(row, r.end_ns);
    int_field(row, r.latency_ns());
    int_field(row, r.queuing_delay_ns);
    int_field(row, r.ttft_ns());
    int_field(row, r.tpot_ns());
}

/// Appends the [`PD_CSV_COLUMNS`] of `r`.
fn push_pd_columns(row: &mut Vec<u8>, r: &RequestRecord<'_>) {
    let mut num = itoa::Buffer::new();
    let (prefill, transfer) = match &r.pd {
        Some(pd) => (pd.prefill_instance, pd.kv_transfer_ns()),
        None => (r.instance_id, 0),
    };
    row.push(b',');
    row.extend_from_slice(num.format(prefill).as_bytes());
    row.push(b',');
    row.extend_from_slice(num.format(transfer).as_bytes());
}

/// Appends the [`SESSION_COLUMNS`]: `session`'s id and step label, or two empty fields.
fn push_session_columns(row: &mut Vec<u8>, session: Option<(&str, &str)>) {
    row.push(b',');
    if let Some((id, step)) = session {
        push_text_field(row, id);
        row.push(b',');
        push_text_field(row, step);
    } else {
        row.push(b',');
    }
}

/// Appends `itl` as Python's list repr, `[a, b, c]`, quoted when it contains a comma.
fn push_itl_field(row: &mut Vec<u8>, itl: Itl<'_>) {
    let mut num = itoa::Buffer::new();
    let quoted = itl.len() > 1;
    if quoted {
        row.push(b'"');
    }
    row.push(b'[');
    for (i, gap) in itl.iter().enumerate() {
        if i > 0 {
            row.extend_from_slice(b", ");
        }
        row.extend_from_slice(num.format(gap).as_bytes());
    }
    row.push(b']');
    if quoted {
        row.push(b'"');
    }
}

/// Appends `text` with Python's `QUOTE_MINIMAL` rule: quoted, with quotes doubled, only when
/// it contains a comma, a quote or a line break.
pub(super) fn push_text_field(row: &mut Vec<u8>, text: &str) {
    if !text.contains([',', '"', '\r', '\n']) {
        row.extend_from_slice(text.as_bytes());
        return;
    }
    row.push(b'"');
    for &byte in text.as_bytes() {
        if byte == b'"' {
            row.push(b'"');
        }
        row.push(byte);
    }
    row.push(b'"');
}
