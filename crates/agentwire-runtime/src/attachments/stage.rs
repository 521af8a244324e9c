//! Staging an attachment: the checks of a request that need neither the map nor the disk (file
//! name, digest form, size, media type and extension, local path form), the quota slot reserved
//! while its file is created or copied in, and the display name shown for its file name.

use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};

use super::error::not_found;
use super::spool::{copy_local, create_spool_file};
use super::{
    AttachmentDescriptor, AttachmentError, AttachmentState, Entry, FALLBACK_DISPLAY_NAME, Inner,
    MAX_FILE_NAME_UNITS, MediaType, PathRejection, Phase, SizeLimit, StageRequest, StageSource,
    Staged, TypeRejection, Upload, UploadEnd,
};

impl Inner {
    pub(super) fn stage(
        &self,
        thread_id: String,
        request: StageRequest,
    ) -> Result<Staged, AttachmentError> {
        let media_type = self.check(&request)?;
        let attachment_id = uuid::Uuid::new_v4().to_string();
        let created_at_ms = self.clock.now_ms();
        let descriptor = AttachmentDescriptor {
            attachment_id: attachment_id.clone(),
            display_name: display_name(&request.file_name),
            file_name: request.file_name,
            media_type,
            bytes: request.bytes,
            sha256: request.sha256,
            source: request.source.kind(),
            created_at_ms,
        };
        let expired = {
            let mut entries = self.lock();
            let expired = self.take_expired(&mut entries);
            if entries.len() >= self.limits.max_retained {
                drop(entries);
                self.remove_files(&expired);
                return Err(AttachmentError::QuotaExceeded {
                    max: self.limits.max_retained,
                });
            }
            entries.insert(
                attachment_id.clone(),
                Entry {
                    thread_id,
                    descriptor: descriptor.clone(),
                    since_ms: created_at_ms,
                    phase: Phase::Reserved,
                },
            );
            expired
        };
        self.remove_files(&expired);

        let path = self.path_of(&attachment_id);
        let filled = match &request.source {
            StageSource::Chunks => create_spool_file(&path)
                .map(drop)
                .map_err(AttachmentError::storage("creating a spool file")),
            StageSource::LocalPath(source) => copy_local(source, &path, self.limits.max_bytes)
                .and_then(|(bytes, sha256)| {
                    if bytes == descriptor.bytes && sha256 == descriptor.sha256 {
                        Ok(())
                    } else {
                        self.remove_files(std::slice::from_ref(&path));
                        Err(AttachmentError::HashMismatch {
                            declared: descriptor.sha256.clone(),
                            actual: sha256,
                        })
                    }
                }),
        };

        let mut entries = self.lock();
        if let Err(error) = filled {
            entries.remove(&attachment_id);
            return Err(error);
        }
        let Some(entry) = entries.get_mut(&attachment_id) else {
            // Only this call knows the id, and nothing removes a reserved entry.
            return Err(not_found(&attachment_id));
        };
        Ok(match request.source {
            StageSource::Chunks => {
                entry.phase = Phase::Uploading(Arc::new(Mutex::new(Upload {
                    received: 0,
                    next_sequence: 0,
                    hasher: Sha256::new(),
                    last: None,
                    end: UploadEnd::Open,
                })));
                Staged {
                    attachment_id,
                    state: AttachmentState::Staged,
                    descriptor: None,
                }
            }
            StageSource::LocalPath(_) => {
                entry.phase = Phase::Committed;
                entry.since_ms = self.clock.now_ms();
                Staged {
                    attachment_id,
                    state: AttachmentState::Committed,
                    descriptor: Some(descriptor),
                }
            }
        })
    }

    /// The checks of a stage that need neither the map nor the disk, in the order a caller
    /// meets them: the form of the input, the size limit, the media type, its extension, then
    /// the form of a local path.
    fn check(&self, request: &StageRequest) -> Result<MediaType, AttachmentError> {
        let units = request.file_name.encode_utf16().count();
        if units == 0 || units > MAX_FILE_NAME_UNITS {
            return Err(AttachmentError::InvalidFileName { units });
        }
        if !is_sha256_hex(&request.sha256) {
            return Err(AttachmentError::InvalidSha256);
        }
        if request.bytes == 0 {
            return Err(AttachmentError::InvalidSize);
        }
        if request.bytes > self.limits.max_bytes {
            return Err(AttachmentError::TooLarge {
                limit: SizeLimit::Attachment,
                bytes: request.bytes,
                max: self.limits.max_bytes,
            });
        }
        let unsupported = |reason| AttachmentError::TypeUnsupported {
            media_type: request.media_type.clone(),
            file_name: request.file_name.clone(),
            reason,
        };
        let media_type = MediaType::parse(&request.media_type)
            .filter(|t| self.limits.media_types.contains(t))
            .ok_or_else(|| unsupported(TypeRejection::MediaType))?;
        let agrees = extension(&request.file_name).is_some_and(|found| {
            media_type
                .extensions()
                .iter()
                .any(|known| known.eq_ignore_ascii_case(found))
        });
        if !agrees {
            return Err(unsupported(TypeRejection::Extension));
        }
        if let StageSource::LocalPath(path) = &request.source
            && !path.is_absolute()
        {
            return Err(AttachmentError::PathRejected {
                path: path.clone(),
                reason: PathRejection::NotAbsolute,
            });
        }
        Ok(media_type)
    }
}

/// The display name of a file name: surrounding white space trimmed, then control characters,
/// bidirectional-text controls and path separators replaced by `_`, at most 255 UTF-16 code
/// units, never empty ([`FALLBACK_DISPLAY_NAME`]).
pub fn display_name(file_name: &str) -> String {
    let replaced: String = file_name
        .trim()
        .chars()
        .map(|c| {
            if c.is_control() || c == '/' || c == '\\' || is_bidi_control(c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    let mut name = String::new();
    let mut units = 0;
    for c in replaced.chars() {
        units += c.len_utf16();
        if units > MAX_FILE_NAME_UNITS {
            break;
        }
        name.push(c);
    }
    let name = name.trim_end();
    if name.is_empty() {
        FALLBACK_DISPLAY_NAME.to_owned()
    } else {
        name.to_owned()
    }
}

/// Characters that reorder text around them, so a name could show another extension than it
/// has.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The extension of a file name's last component, when it has a stem.
fn extension(file_name: &str) -> Option<&str> {
    let last = file_name.rsplit(['/', '\\']).next()?;
    let (stem, extension) = last.rsplit_once('.')?;
    (!stem.is_empty() && !extension.is_empty()).then_some(extension)
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
