//! spray-fi: the cdylib libfabric dlopens. All `unsafe` of the project lives here.
