"""Contrastive image-text encoders: training with open_clip_train and retrieval/zero-shot evaluation."""
