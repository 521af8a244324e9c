//! A chunked upload and its commit: chunks taken in order (a repeated last chunk answered as
//! before, a refused one changing nothing), and the commit that verifies the size and SHA-256
//! of what arrived before the attachment may be named in a turn.

use std::sync::{Arc, Mutex, PoisonError};

use sha2::Digest as _;

use super::error::not_found;
use super::spool::{hex, same_bytes_at, write_at};
use super::{
    AttachmentDescriptor, AttachmentError, ChunkProgress, Inner, LastChunk, Phase, SizeLimit,
    Upload, UploadEnd,
};

/// What a commit found.
enum Committing {
    Upload(Arc<Mutex<Upload>>),
    Done(AttachmentDescriptor),
}

impl Inner {
    fn upload_of(
        &self,
        thread_id: &str,
        attachment_id: &str,
    ) -> Result<(Arc<Mutex<Upload>>, u64), AttachmentError> {
        self.with_entry(thread_id, attachment_id, |entries| {
            let entry = entries
                .get(attachment_id)
                .ok_or_else(|| not_found(attachment_id))?;
            match &entry.phase {
                Phase::Uploading(upload) => Ok((Arc::clone(upload), entry.descriptor.bytes)),
                Phase::Committed => Err(AttachmentError::NotUploading {
                    attachment_id: attachment_id.to_owned(),
                }),
                Phase::Reserved => Err(not_found(attachment_id)),
            }
        })
    }

    pub(super) fn chunk(
        &self,
        thread_id: &str,
        attachment_id: &str,
        sequence: u64,
        data: &[u8],
    ) -> Result<ChunkProgress, AttachmentError> {
        let (upload, declared) = self.upload_of(thread_id, attachment_id)?;
        let mut upload = upload.lock().unwrap_or_else(PoisonError::into_inner);
        // Committed or discarded since the entry was looked up?
        match upload.end {
            UploadEnd::Open => {}
            UploadEnd::Committed => {
                return Err(AttachmentError::NotUploading {
                    attachment_id: attachment_id.to_owned(),
                });
            }
            UploadEnd::Discarded => return Err(not_found(attachment_id)),
        }
        let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
        let path = self.path_of(attachment_id);
        let progress = |upload: &Upload| ChunkProgress {
            received_bytes: upload.received,
            next_sequence: upload.next_sequence,
        };
        if let Some(last) = upload.last
            && last.sequence == sequence
        {
            return if last.len == len && same_bytes_at(&path, last.offset, data, attachment_id)? {
                Ok(progress(&upload))
            } else {
                Err(AttachmentError::ChunkConflict { sequence })
            };
        }
        if sequence != upload.next_sequence {
            return Err(AttachmentError::ChunkOutOfOrder {
                expected: upload.next_sequence,
                got: sequence,
            });
        }
        if data.is_empty() {
            return Err(AttachmentError::EmptyChunk);
        }
        if len > self.limits.max_chunk_bytes {
            return Err(AttachmentError::TooLarge {
                limit: SizeLimit::Chunk,
                bytes: len,
                max: self.limits.max_chunk_bytes,
            });
        }
        let total = upload.received.saturating_add(len);
        if total > declared {
            return Err(AttachmentError::TooLarge {
                limit: SizeLimit::Declared,
                bytes: total,
                max: declared,
            });
        }
        write_at(&path, upload.received, data, attachment_id)?;
        upload.hasher.update(data);
        upload.last = Some(LastChunk {
            sequence,
            offset: upload.received,
            len,
        });
        upload.received = total;
        upload.next_sequence += 1;
        Ok(progress(&upload))
    }

    pub(super) fn commit(
        &self,
        thread_id: &str,
        attachment_id: &str,
    ) -> Result<AttachmentDescriptor, AttachmentError> {
        let found = self.with_entry(thread_id, attachment_id, |entries| {
            let entry = entries
                .get(attachment_id)
                .ok_or_else(|| not_found(attachment_id))?;
            match &entry.phase {
                Phase::Uploading(upload) => Ok(Committing::Upload(Arc::clone(upload))),
                Phase::Committed => Ok(Committing::Done(entry.descriptor.clone())),
                Phase::Reserved => Err(not_found(attachment_id)),
            }
        })?;
        let upload = match found {
            Committing::Upload(upload) => upload,
            Committing::Done(descriptor) => return Ok(descriptor),
        };
        let mut upload = upload.lock().unwrap_or_else(PoisonError::into_inner);
        if upload.end != UploadEnd::Open {
            // Another commit finished first: answer as a repeated commit.
            drop(upload);
            return self.with_entry(thread_id, attachment_id, |entries| {
                entries
                    .get(attachment_id)
                    .filter(|entry| matches!(entry.phase, Phase::Committed))
                    .map(|entry| entry.descriptor.clone())
                    .ok_or_else(|| not_found(attachment_id))
            });
        }
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(attachment_id) else {
            return Err(not_found(attachment_id));
        };
        if upload.received != entry.descriptor.bytes {
            return Err(AttachmentError::UploadIncomplete {
                received: upload.received,
                declared: entry.descriptor.bytes,
            });
        }
        let actual = hex(&upload.hasher.clone().finalize());
        if actual != entry.descriptor.sha256 {
            upload.end = UploadEnd::Discarded;
            let declared = entry.descriptor.sha256.clone();
            entries.remove(attachment_id);
            drop(entries);
            self.remove_files(&[self.path_of(attachment_id)]);
            return Err(AttachmentError::HashMismatch { declared, actual });
        }
        upload.end = UploadEnd::Committed;
        entry.phase = Phase::Committed;
        entry.since_ms = self.clock.now_ms();
        Ok(entry.descriptor.clone())
    }
}
