# Runs ropex-study on the committed trained model with small settings and fails unless every
# output file exists and passkey retrieval at the training length (factor 1) is >= MIN_ACCURACY
# over all of its trials: the model must work at its training length before any extension
# measured on it means anything.
#   cmake -DSTUDY=ropex-study -DMODEL=dir -DTEXT=file -DOUT=dir -DMIN_ACCURACY=0.95 [-DTRIALS=40] -P check_trained_model.cmake
#
# Why the trials are pooled over policies and depths: a cell of 20 trials has a standard error
# of ~5 points near 0.95, so a per-cell gate fails on two misses, and the model misses about 0.5%
# of keys at 128 bytes (its misses gather at depth 100%, the needle right before the question).
# At factor 1 plain and YaRN are the same function (YaRN with factor 1 is plain RoPE), so the
# 2 policies x 3 depths x 40 trials are 240 draws of one accuracy. The gate allows floor(0.05 x 240) = 12 misses:
# at a 1% miss rate it fails with probability ~1e-6 (binomial), at 2% ~1e-3, while a model that
# retrieves 90% passes with probability 0.004 and a broken forward (accuracy near 0) always fails.
# The study is seeded, so a given build gives the same answer every run; the margin covers compilers
# and instruction sets whose rounding flips a near-tie in greedy decoding.
set(trials 40)
if(DEFINED TRIALS)
  set(trials ${TRIALS})
endif()
foreach(var STUDY MODEL TEXT OUT MIN_ACCURACY)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_trained_model: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${OUT})
execute_process(
  COMMAND ${STUDY} --model ${MODEL} --text ${TEXT} --policies plain,yarn --factors 1,4 --depths 0,50,100
          --passkey-trials ${trials} --needle " @{key}. " --question " @" --out ${OUT}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "ropex-study failed (${status})")
endif()
foreach(name model-perplexity.csv model-perplexity.svg model-entropy.csv model-entropy.svg model-js.csv
             model-js.svg model-passkey.csv model-passkey-plain.svg model-passkey-yarn.svg)
  if(NOT EXISTS ${OUT}/${name})
    message(FATAL_ERROR "ropex-study wrote no ${name}")
  endif()
endforeach()

# A decimal as written by the study ("1", "0.95", "0.975") as the fraction num / den, exactly
# (CMake's math() knows only integers). Anything else, "nan" included, is a failure.
function(decimal_fraction text num_var den_var)
  if(NOT text MATCHES "^([0-9]+)(\\.([0-9]+))?$")
    message(FATAL_ERROR "not a decimal accuracy: '${text}'")
  endif()
  set(whole ${CMAKE_MATCH_1})
  set(digits "${CMAKE_MATCH_3}")
  string(LENGTH "${digits}" k)
  string(REPEAT "0" ${k} zeros)
  set(den "1${zeros}")
  # "1" + digits - den keeps leading zeros of the digits from reading as octal.
  math(EXPR num "${whole} * ${den} + 1${digits} - ${den}")
  set(${num_var} ${num} PARENT_SCOPE)
  set(${den_var} ${den} PARENT_SCOPE)
endfunction()

# model-passkey.csv: policy,length,depth_percent,accuracy; factor 1 is the smallest length.
file(STRINGS ${OUT}/model-passkey.csv rows)
list(REMOVE_AT rows 0)
set(shortest 0)
foreach(row IN LISTS rows)
  string(REPLACE "," ";" f "${row}")
  list(GET f 1 length)
  if(shortest EQUAL 0 OR length LESS shortest)
    set(shortest ${length})
  endif()
endforeach()
set(cells 0)
set(correct 0)
set(by_cell "")
foreach(row IN LISTS rows)
  string(REPLACE "," ";" f "${row}")
  list(GET f 0 policy)
  list(GET f 1 length)
  list(GET f 2 depth)
  list(GET f 3 accuracy)
  if(length EQUAL shortest)
    decimal_fraction(${accuracy} num den)
    # The keys this cell got right: accuracy x trials, rounded (the study prints 6 digits).
    math(EXPR hits "(${num} * ${trials} + ${den} / 2) / ${den}")
    math(EXPR cells "${cells} + 1")
    math(EXPR correct "${correct} + ${hits}")
    string(APPEND by_cell " ${policy}@${depth}%:${hits}")
  endif()
endforeach()
if(NOT cells EQUAL 6)
  message(FATAL_ERROR "model-passkey.csv has ${cells} cells at the training length, not 2 policies x 3 depths")
endif()
math(EXPR pooled "${cells} * ${trials}")
decimal_fraction(${MIN_ACCURACY} num den)
math(EXPR required "(${num} * ${pooled} + ${den} - 1) / ${den}")  # ceil(MIN_ACCURACY x pooled)
if(correct LESS required)
  message(FATAL_ERROR "passkey at the training length (${shortest} tokens): ${correct}/${pooled} keys, "
                      "fewer than ${required} (${MIN_ACCURACY}); correct per cell of ${trials}:${by_cell}")
endif()
message(STATUS "passkey at the training length (${shortest} tokens): ${correct}/${pooled} keys >= ${required} "
               "(${MIN_ACCURACY}); correct per cell of ${trials}:${by_cell}")
