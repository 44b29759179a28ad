// model.init_from, data.train_shards and data.val_shards given as s3:// URIs (docs/object_storage.md
// "Reading inputs"): the objects are brought into <output.root_dir>/.cache/s3/ (storage/object_cache.h)
// and the typed config's values replaced by the local paths. cfg.resolved keeps the shard URIs, so a
// resume compares what the user wrote; model.init_from is replaced there too (a model directory's
// config.json re-reads the model section from cfg.resolved), so the run's config.yaml names the cache. Every rank
// calls it (downloads are renamed into place, so ranks sharing a cache directory may race harmlessly).
#pragma once

namespace llmt::config {
struct Config;
}

namespace llmt::train {

// No-op (and no store contact) when none of the three keys is an s3:// URI. Throws InputError naming
// the key when nothing is there, StorageError for the store, InputError without credentials.
void fetch_remote_inputs(config::Config& cfg);

}  // namespace llmt::train
