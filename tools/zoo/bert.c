/*
 * BERT-base (Devlin et al. 2019): embeddings (word + position + token type, layer_norm), 12
 * encoder layers of 12-head self-attention and a gelu FFN, post-layer_norm, sequence 128. No
 * pooler. Activations are kept as [batch·seq, hidden] rows between layers, which is what
 * fully_connected takes; attention reshapes them to heads and back.
 *
 * The training form adds dropout 0.1 (embeddings, attention probabilities, both residual
 * branches) and the masked-LM head of pre-training: dense + gelu + layer_norm, then a decoder
 * tied to the word embeddings (its weight is the embedding table, plus a bias) over the whole
 * vocabulary, with softmax cross-entropy at every position ("mlm_labels").
 */
#include <math.h>
#include <stdio.h>

#include "layers.h"

enum { VOCAB = 30522, MAX_POSITIONS = 512, TOKEN_TYPES = 2, HIDDEN = 768, HEADS = 12, LAYERS = 12,
       FFN = 3072, SEQ = 128 };
#define LN_EPS 1e-12

static const int64_t to_heads[] = { 0, 2, 1, 3 }; /* [B, S, A, D] <-> [B, A, S, D]; its own inverse */

// x: [B·S, H] -> fc -> [B, A, S, D]
static pbl_value project_heads(zl *b, pbl_value x, const char *fc, int64_t batch)
{
    char rs[48], tr[48];
    snprintf(rs, sizeof rs, "%s.reshape", fc);
    snprintf(tr, sizeof tr, "%s.transpose", fc);
    pbl_value y = zl_reshape(b, zl_fc(b, x, fc, HIDDEN), rs, PBL_SHAPE(batch, SEQ, HEADS, HIDDEN / HEADS));
    return zl_transpose(b, y, tr, to_heads, 4);
}

// h: [B·S, H], mask: [B, 1, 1, S] (additive) -> [B·S, H]
static pbl_value encoder_layer(zl *b, pbl_value h, pbl_value mask, int64_t batch)
{
    pbl_value q = project_heads(b, h, "attn.query", batch);
    pbl_value k = project_heads(b, h, "attn.key", batch);
    pbl_value v = project_heads(b, h, "attn.value", batch);

    // scores: [B, A, S, S] = q·kᵀ / sqrt(D) + mask, softmax over the keys
    pbl_attr tb = PBL_ATTR_INT("trans_b", 1);
    pbl_value s = zl_node(b, "matmul", "attn.scores", (pbl_value[]){ q, k }, 2, &tb, 1, NULL);
    pbl_attr alpha = PBL_ATTR_FLOAT("alpha", 1.0 / sqrt((double)(HIDDEN / HEADS)));
    s = zl_node(b, "scale", "attn.scale", &s, 1, &alpha, 1, NULL);
    s = zl_binary(b, "add", s, mask, "attn.mask");
    s = zl_dropout(b, zl_unary(b, "softmax", s, "attn.softmax"), "attn.dropout", 0.1);

    // context: [B, A, S, D] -> [B, S, A, D] -> [B·S, H]
    pbl_value c = zl_binary(b, "matmul", s, v, "attn.context");
    c = zl_transpose(b, c, "attn.context.transpose", to_heads, 4);
    c = zl_reshape(b, c, "attn.context.reshape", PBL_SHAPE(batch * SEQ, HIDDEN));
    c = zl_dropout(b, zl_fc(b, c, "attn.output", HIDDEN), "attn.output.dropout", 0.1);
    h = zl_layer_norm(b, zl_binary(b, "add", c, h, "attn.residual"), "attn.ln", LN_EPS);

    // FFN: [B·S, H] -> [B·S, 3072] -> [B·S, H]
    pbl_value f = zl_unary(b, "gelu", zl_fc(b, h, "ffn.in", FFN), "ffn.gelu");
    f = zl_dropout(b, zl_fc(b, f, "ffn.out", HIDDEN), "ffn.dropout", 0.1);
    return zl_layer_norm(b, zl_binary(b, "add", f, h, "ffn.residual"), "ffn.ln", LN_EPS);
}

void zoo_bert_base(zl *b, int64_t batch)
{
    b->opt = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    b->opt.lr = 1e-4;
    b->opt.weight_decay = 0.01;

    pbl_value ids = zl_var(b, "input_ids", PBL_VALUE_INPUT, PBL_I32, PBL_SHAPE(batch, SEQ));
    pbl_value pos = zl_var(b, "position_ids", PBL_VALUE_INPUT, PBL_I32, PBL_SHAPE(batch, SEQ));
    pbl_value type = zl_var(b, "token_type_ids", PBL_VALUE_INPUT, PBL_I32, PBL_SHAPE(batch, SEQ));
    pbl_value mask = zl_var(b, "attention_mask", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(batch, 1, 1, SEQ));

    // embeddings: 3 x [B, S, H] summed -> [B·S, H]
    zl_scope(b, "embeddings");
    pbl_value word = zl_param(b, "word.weight", PBL_SHAPE(VOCAB, HIDDEN));
    pbl_value pos_t = zl_param(b, "position.weight", PBL_SHAPE(MAX_POSITIONS, HIDDEN));
    pbl_value type_t = zl_param(b, "token_type.weight", PBL_SHAPE(TOKEN_TYPES, HIDDEN));
    pbl_value e = zl_binary(b, "embedding", ids, word, "word");
    e = zl_binary(b, "add", e, zl_binary(b, "embedding", pos, pos_t, "position"), "add_position");
    e = zl_binary(b, "add", e, zl_binary(b, "embedding", type, type_t, "token_type"), "add_token_type");
    e = zl_reshape(b, e, "reshape", PBL_SHAPE(batch * SEQ, HIDDEN));
    pbl_value h = zl_dropout(b, zl_layer_norm(b, e, "ln", LN_EPS), "dropout", 0.1);

    for (int l = 0; l < LAYERS; l++) {
        zl_scope(b, "layer%d", l);
        h = encoder_layer(b, h, mask, batch);
    }
    zl_unscope(b);
    zl_output(b, "sequence_output", zl_reshape(b, h, "sequence_output", PBL_SHAPE(batch, SEQ, HIDDEN)));
    if (!b->training)
        return;

    // masked-LM head: [B·S, H] -> [B·S, VOCAB], decoder weight tied to the word embeddings
    zl_scope(b, "mlm");
    pbl_value t = zl_unary(b, "gelu", zl_fc(b, h, "transform", HIDDEN), "transform.gelu");
    t = zl_layer_norm(b, t, "transform.ln", LN_EPS);
    pbl_value bias = zl_param(b, "decoder.bias", PBL_SHAPE(VOCAB));
    pbl_value logits = zl_node(b, "fully_connected", "decoder", (pbl_value[]){ t, word, bias }, 3, NULL, 0, NULL);
    zl_output(b, "logits", logits);
    zl_cross_entropy(b, logits, "mlm_labels");
}
